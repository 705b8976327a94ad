"""Where a privatizer's noise comes from, and the event that describes it.

:class:`NoiseSource` draws unit noise for one release per step: ``"gaussian"`` (i.i.d. ``N(0, I)``
per step, DP-SGD) or correlated noise (DP-MF, [DESIGN] §2.1): ``"sqrt_toeplitz"`` or
``"banded:<k>"``, streamed by :func:`dpsim.privacy.mf.noise_stream` as ``u_t = sens(M)·(M⁻¹Z)_t``.
:meth:`NoiseSource.event` is the matching declaration: a
:class:`~dpsim.privacy.events.GaussianRelease` for i.i.d. noise, a
:class:`~dpsim.privacy.events.CorrelatedRelease` otherwise (amplified under Poisson or cyclic
Poisson sampling when the strategy's bandwidth is at most the number of groups; else one Gaussian
mechanism with noise multiplier ``σ·sens(M)/worst_sens(M)`` for the whole sequence, no
amplification by sampling — :mod:`dpsim.accounting`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from . import mf
from .events import CorrelatedRelease, GaussianRelease
from .._validate import is_zero

__all__ = ["NoiseSource", "StreamState", "add_noise"]


class StreamState(NamedTuple):
    stream: Any  # the run's dpsim.privacy.mf.NoiseStream (built at the first draw, for T steps)
    state: Any  # its streaming state


class NoiseSource:
    """Unit noise of one release per step; ``noise`` is ``"gaussian"`` or a DP-MF strategy name.

    Examples
    --------
    >>> from dpsim.privacy.noise import NoiseSource
    >>> src = NoiseSource("banded:2")
    >>> src.correlated, src.event(1.0).strategy
    (True, 'banded:2')
    >>> NoiseSource("gaussian").correlated
    False
    """

    def __init__(self, noise: str = "gaussian"):
        kind, _ = mf.parse_noise(noise)  # ValueError naming a bad value
        self.noise = noise
        self.correlated = kind != "identity"

    def draw(self, nstate, ctx, shape):
        """``(u, nstate)``: one step of unit noise of ``shape`` (``nstate`` None before step 1).

        Parameters
        ----------
        nstate : object or None
            The source's state.
        ctx : StepContext
            The step's context.
        shape : tuple of int
            The draw shape.

        Returns
        -------
        tuple
            ``(u, nstate)``.
        """
        if not self.correlated:
            return ctx.backend.normal(shape), None
        if nstate is None:
            st = mf.noise_stream(self.noise, ctx.num_steps)
            nstate = StreamState(st, st.init(shape, ctx.backend))
        u, inner = nstate.stream.next(nstate.state, ctx.backend)
        return u, StreamState(nstate.stream, inner)

    def event(self, sigma, schedule=None, sensitivity=None):
        """The privacy event of this source releasing with noise multiplier ``sigma`` (a validated
        hyperparameter) on the steps of ``schedule`` (``None``: every step).

        Parameters
        ----------
        sigma : float or array
            The noise multiplier.
        schedule : callable, optional
            The release's steps (default every step).
        sensitivity : str, optional
            The sensitivity, in words.

        Returns
        -------
        PrivacyEvent
            A :class:`~dpsim.privacy.events.GaussianRelease` or
            :class:`~dpsim.privacy.events.CorrelatedRelease`.
        """
        s = sigma if isinstance(sigma, float) else tuple(float(x) for x in sigma)
        kw = {} if sensitivity is None else {"sensitivity": sensitivity}
        if self.correlated:
            return CorrelatedRelease(noise_multiplier=s, strategy=self.noise, schedule=schedule, **kw)
        return GaussianRelease(noise_multiplier=s, schedule=schedule, **kw)


def add_noise(total, std, b: float, ctx, src: NoiseSource, nstate=None):
    """``((total + std · u) / b, nstate)`` with unit noise ``u`` from ``src``, computed in place on
    the fresh noise array; ``std`` ``None`` or scalar 0: no noise is drawn.

    On NumPy the three element-wise operations run as one fused pass (:func:`_noisy_mean`), with
    the same operations in the same order as ``u *= std; u += total; u /= b``, so the result is
    bit-for-bit the one of the three-pass form (``tests/core/test_backend.py``).

    Parameters
    ----------
    total : array
        The clipped sums, ``(R, d)``.
    std : float, array or None
        Noise standard deviation (``σC``), scalar or per trial.
    b : float
        The nominal batch size to divide by.
    ctx : StepContext
        The step's context (backend, generator).
    src : NoiseSource
        Where the unit noise comes from.
    nstate : object, optional
        The noise source's state.

    Returns
    -------
    tuple
        ``(noisy mean, new noise state)``.
    """
    if std is None or is_zero(std):
        return total / b, nstate
    z, nstate = src.draw(nstate, ctx, total.shape)
    s = ctx.hp(std)
    if (isinstance(z, np.ndarray) and isinstance(total, np.ndarray) and z.ndim == 2
            and z.shape == total.shape and z.dtype == total.dtype and z.flags.c_contiguous
            and total.flags.c_contiguous and z.flags.writeable):
        if isinstance(s, float):
            _noisy_mean(z, total, np.full((1, 1), s, dtype=z.dtype), float(b))
            return z, nstate
        if isinstance(s, np.ndarray) and s.shape == (z.shape[0], 1) and s.dtype == z.dtype:
            _noisy_mean(z, total, s, float(b))
            return z, nstate
    z *= s
    z += total
    z /= b
    return z, nstate


@numba.njit(cache=True, nogil=True)
def _noisy_mean(z, total, s, b):
    """``z ← (z · s + total) / b`` in one pass; ``s`` (1, 1) or (R, 1).  The rounding is that of the
    three NumPy passes: a product, a sum, a quotient, each rounded once (no fused multiply-add:
    Numba compiles without fast-math, so LLVM does not contract ``z·s + total``)."""
    R, d = z.shape
    per_row = s.shape[0] != 1
    for r in range(R):
        sr = s[r, 0] if per_row else s[0, 0]
        for j in range(d):
            z[r, j] = (z[r, j] * sr + total[r, j]) / b
