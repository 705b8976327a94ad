"""Correlated noise for DP matrix factorization (DP-MF), streamed step by step.

Contract (ALGORITHMS §2.6, "Correlated noise, DP-MF"; [DESIGN] §2.1 — formulas there were lost in
extraction, the statement below is the standard one of the DP-MF literature, **reconstructed**).
For a lower-triangular invertible *strategy* ``M`` (T×T) and ``Z`` with i.i.d. ``N(0, I_d)`` rows, the
noise added to the averaged clipped gradient at step ``t`` is

    (σ C / b) · sens(M) · (M⁻¹ Z)_t,        sens(M) = max_j ||M_{:,j}||₂ ,

i.e. the run releases the prefix sums ``A X + σ C sens(M) · A M⁻¹ Z`` of the clipped gradient sums
``X`` (``A`` = all-ones lower triangle), which is the post-processing ``B (M X + σ C sens(M) Z)`` of one
Gaussian mechanism on ``M X`` through the factorization ``A = B M``, ``B = A M⁻¹``.  ``M = I`` is DP-SGD.
This module produces the *unit-scale* step noise ``u_t = sens(M) · (M⁻¹ Z)_t``; the privatizer
multiplies it by ``σ C / b``.

Privacy meaning (what the lead declares to the accountant).
    * **Single participation** (each example contributes to at most one step, e.g. one pass over
      disjoint batches): changing one example changes ``M X`` by ``M_{:,j} g^T`` with
      ``||g|| ≤ C``, ℓ2 norm at most ``C · sens(M)``.  The whole run is therefore ONE Gaussian
      mechanism with noise multiplier ``σ`` (not T of them).
    * **Unrestricted participation** (no bound on how often, or how close together, an example
      is used): the sensitivity of ``M X`` is ``C · worst_case_sensitivity(M)``, so the whole run
      is ONE Gaussian mechanism with noise multiplier ``σ · sens(M) / worst_sens(M)``, **without**
      amplification by sampling ("unamplified").  For ``M = I`` this equals T-fold composition of
      the unamplified Gaussian with multiplier σ (``worst_sens = √T``); identity noise keeps
      DP-SGD's amplified accounting instead (it declares a plain Gaussian release — its draws are
      bit-identical to DP-SGD's).  MMCC-style amplification for general matrices (Choquette-Choo,
      Ganesh, Steinke & Thakurta, ICLR 2024) is not implemented.
    * **Cyclic Poisson participation, banded strategy** (amplified; Choquette-Choo, McMahan, Rush &
      Thakurta, "(Amplified) Banded Matrix Factorization: A unified approach to private
      training", NeurIPS 2023, arXiv:2306.08153, the amplification theorem of its §4; the same
      reduction as jax_privacy's ``amplified_bandmf_event``).  Let the *bandwidth* ``w`` of ``M``
      be the number of its nonzero diagonals (:attr:`NoiseStream.bandwidth`: ``w = 1`` for
      identity and ``banded:1``, ``min(k_bands, T)`` for ``banded:<k_bands>``, ``T`` for
      ``sqrt_toeplitz``), so column ``j`` of ``M`` is supported on rows ``j … j + w − 1``.  Under
      ``sampling="cyclic_poisson:<k>"`` (:mod:`dpsim.sampling`) the examples are split into ``k``
      fixed groups and step ``t`` Poisson-samples group ``(t − 1) mod k`` at rate
      ``q_k = b·k/n``; ``"poisson"`` is the case ``k = 1``.  Take ``w ≤ k`` and fix one example
      ``x`` of group ``g``.  It can take part only in the steps ``j`` of its group, which are
      ``k ≥ w`` apart, so the row blocks ``j … j + w − 1`` its columns touch are **disjoint**:
      each potential participation ``j`` changes only its own block of ``M X`` (by
      ``M_{:,j} g_jᵀ`` if ``x`` was sampled at ``j``, by nothing otherwise), and the block is
      released in full (steps ``j … j + w − 1 < j + k``) before the example's next chance.  Inside
      a block, the other examples' contributions to rows after ``j`` depend on earlier outputs,
      but those are known to the adversary when the row is released and cancel in the privacy
      loss; what remains is the shift ``1[x ∈ B_j] · M_{j:j+w, j} g_j`` with
      ``‖M_{:,j} g_jᵀ‖_F ≤ C·‖M_{:,j}‖ ≤ C·sens(M)`` under noise ``σ C sens(M) · N(0, I)`` per
      entry: a Poisson-subsampled Gaussian mechanism at rate ``q_k`` with noise multiplier at
      least ``σ``.  The example has at most ``⌈T/k⌉`` such chances, chosen adaptively one after
      the other, so the run is dominated by **DP-SGD with noise multiplier σ, sampling rate q_k
      and ⌈T/k⌉ steps** — in dpsim's normalization the ``sens(M)`` factor of the noise is exactly
      the column normalization the theorem assumes, so no rescaling of σ is needed.  For ``w = 1``
      and ``k = 1`` this *is* DP-SGD (``banded:1`` is ``M = m_0 I``; the noise is ``σ C Z``).
      With ``w > k`` the blocks overlap and the reduction does not apply; dpsim then falls back
      to the unamplified bound above, which holds for every participation pattern (labelled
      ``"unamplified"`` in the run's privacy record).

Strategies (``strategy(name, steps)``; also accepted by :func:`noise_stream`):
    * ``"identity"`` (alias ``"gaussian"``): ``M = I``, i.i.d. noise.
    * ``"sqrt_toeplitz"``: ``M = A^{1/2}``, lower-triangular Toeplitz with ``c_k = C(2k,k)/4^k`` (the
      coefficients of ``(1−x)^{-1/2}``), computed by ``c_k = c_{k−1}(2k−1)/(2k)``.  ``M⁻¹`` is Toeplitz
      with the coefficients of ``(1−x)^{1/2}``: ``r_0 = 1``, ``r_k = r_{k−1}(2k−3)/(2k)``.
    * ``"banded:<k>"``: banded lower-triangular Toeplitz with ``k`` bands (``k ≥ 1``; ``k > T`` is
      the same set as ``k = T`` and is clamped), optimized for prefix-sum RMSE — the banded Toeplitz
      optimization of R. McKenna, *Scaling up the Banded Matrix Factorization Mechanism
      for Differentially Private ML* (arXiv:2405.15913, 2024), see :func:`banded_coefficients`.

Normalization of the prefix-sum error (:func:`prefix_rmse`)::

    RMSE(M) = sens(M) · ||A M⁻¹||_F / √T
            = sqrt( (1/T) Σ_t Var[(A · sens(M) M⁻¹ Z)_t] )     per coordinate, unit noise scale,

i.e. the root-mean over the T prefix sums of the per-coordinate noise variance, for noise
multiplier 1 and ``C = b = 1`` (multiply by ``σ C / b`` for the averaged-gradient scale; it is the
square root of the single-participation loss of McKenna 2024 / jax_privacy ``toeplitz.loss`` with
``reduction_fn=mean``).  Identity gives the DP-SGD prefix error ``sqrt(Σ_t t / T) = √((T+1)/2)``.

Large T: every Toeplitz quantity has an O(T)–O(T log T) coefficient version (``toeplitz_*``,
:func:`inverse_coefficients`); the T×T matrices are only for building and inspecting small cases.
The coefficient algebra and the banded optimization live in :mod:`dpsim.privacy._toeplitz` and are
re-exported here.

Streaming (:func:`noise_stream`): ``init(shape, backend) -> state``, ``next(state, backend) ->
(u, state)`` with one ``backend.normal(shape)`` draw ``Z_t`` per step, in order.

    * identity: ``u = Z_t`` exactly (bit-identical to DP-SGD's draws).
    * banded (and any short Toeplitz strategy): forward substitution
      ``y_t = (Z_t − Σ_{j=1}^{k−1} m_j y_{t−j}) / m_0`` (an IIR filter), state = the last ``k−1``
      ``y``'s in a preallocated ring buffer: memory ``(k−1)·R·d``, cost ``O(k·R·d)`` per step (one
      ``tensordot`` over the ring: a single pass, no per-band temporaries).
    * ``sqrt_toeplitz``: ``M⁻¹`` is a full Toeplitz matrix, so exact streaming keeps the history of
      ``Z`` in a preallocated ``(T, *shape)`` buffer (memory ``T·R·d·itemsize``) and computes
      ``y_t = Σ_{j≤t} r_j Z_{t−j}`` (cost ``O(t·R·d)`` at step t).  :func:`noise_stream` raises
      ``ValueError`` suggesting ``banded:<k>`` when the buffer would exceed ``max_bytes``.

State handling: states are ``NamedTuple``s of backend arrays plus a Python step counter; only
array-API (``xp``) operations touch them, so NumPy, CuPy and ``array_api_strict`` all work.  The
returned ``u`` is always a fresh array the caller may modify in place.  The ring / history buffers
are written in place (copying them each step would cost O(k·R·d) / O(T·R·d) extra), so a state is
single-use: ``next`` returns the same buffers with the counter advanced; never call ``next`` twice
on the same state object (or keep an old state expecting it unchanged).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import numba
import numpy as np

from ._toeplitz import (_banded_loss_and_grad, _check_steps, _series_inverse_fft,  # noqa: F401
                        _trim, banded_coefficients, inverse_coefficients, sqrt_toeplitz_coefficients,
                        sqrt_toeplitz_inverse_coefficients, toeplitz_bandwidth, toeplitz_matrix,
                        toeplitz_prefix_rmse, toeplitz_sensitivity, toeplitz_step_variance,
                        toeplitz_worst_case_sensitivity)

__all__ = [
    "strategy",
    "sensitivity",
    "worst_case_sensitivity",
    "prefix_rmse",
    "prefix_sum_matrix",
    "toeplitz_coefficients",
    "toeplitz_matrix",
    "inverse_coefficients",
    "toeplitz_sensitivity",
    "toeplitz_worst_case_sensitivity",
    "toeplitz_bandwidth",
    "toeplitz_prefix_rmse",
    "toeplitz_step_variance",
    "sqrt_toeplitz_coefficients",
    "sqrt_toeplitz_inverse_coefficients",
    "banded_coefficients",
    "parse_noise",
    "noise_stream",
    "NoiseStream",
    "IdentityNoiseState",
    "BandedNoiseState",
    "HistoryNoiseState",
    "DEFAULT_MAX_BYTES",
]

DEFAULT_MAX_BYTES = 2 * 1024**3  # 2 GiB cap on a stream's history buffer

_BANDED_RE = re.compile(r"banded:(\d+)")
_NAMES_HELP = "'identity' (or 'gaussian'), 'sqrt_toeplitz', 'banded:<k>' with an integer k >= 1"


# ----------------------------------------------------------------------------------------------
# names
# ----------------------------------------------------------------------------------------------
def parse_noise(name) -> tuple[str, int | None]:
    """Parse a noise/strategy name → ``("identity", None)``, ``("sqrt_toeplitz", None)`` or
    ``("banded", k)``.  ``"gaussian"`` is an alias of ``"identity"``.  Raises ``ValueError`` naming
    the value otherwise.

    Parameters
    ----------
    name : str
        A noise name.

    Returns
    -------
    tuple
        ``(kind, k)``.

    Examples
    --------
    >>> from dpsim.privacy.mf import parse_noise
    >>> parse_noise("gaussian"), parse_noise("banded:3")
    (('identity', None), ('banded', 3))
    """
    if not isinstance(name, str):
        raise ValueError(f"noise/strategy name must be a string ({_NAMES_HELP}), got {name!r}")
    if name in ("identity", "gaussian"):
        return "identity", None
    if name == "sqrt_toeplitz":
        return "sqrt_toeplitz", None
    if name.startswith("banded"):
        m = _BANDED_RE.fullmatch(name)
        if m is None or int(m.group(1)) < 1:
            raise ValueError(
                f"banded strategy needs a positive integer number of bands, 'banded:<k>' with k >= 1; "
                f"got {name!r}"
            )
        return "banded", int(m.group(1))
    raise ValueError(f"unknown noise/strategy {name!r}; expected {_NAMES_HELP}")


# ----------------------------------------------------------------------------------------------
# Toeplitz coefficients of a named strategy (their algebra: dpsim.privacy._toeplitz)
# ----------------------------------------------------------------------------------------------
def toeplitz_coefficients(name: str, steps: int) -> np.ndarray:
    """Toeplitz coefficients ``m_0, m_1, …`` (first column of ``M``) of a named strategy for ``T``
    steps: identity → ``[1]``, sqrt_toeplitz → ``T`` coefficients, ``banded:k`` → ``min(k, T)``
    optimized coefficients (normalized to ``m_0 = 1``).  Missing trailing coefficients are 0.

    Parameters
    ----------
    name : str
        A strategy name.
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        The coefficients.

    Examples
    --------
    >>> from dpsim.privacy.mf import toeplitz_coefficients
    >>> toeplitz_coefficients("sqrt_toeplitz", 3)
    array([1.   , 0.5  , 0.375])
    """
    kind, k = parse_noise(name)
    steps = _check_steps(steps)
    if kind == "identity":
        return np.ones(1)
    if kind == "sqrt_toeplitz":
        return sqrt_toeplitz_coefficients(steps)
    return banded_coefficients(k, steps)


# ----------------------------------------------------------------------------------------------
# matrices (small T)
# ----------------------------------------------------------------------------------------------
def prefix_sum_matrix(steps: int) -> np.ndarray:
    """``A``: the T×T all-ones lower triangle (prefix sums).

    Parameters
    ----------
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        ``A``, (T, T).
    """
    steps = _check_steps(steps)
    return np.tril(np.ones((steps, steps)))


def strategy(name: str, steps: int) -> np.ndarray:
    """Lower-triangular T×T DP-MF strategy matrix ``M`` for ``"identity"``, ``"sqrt_toeplitz"``
    (``M @ M = A``) or ``"banded:<k>"`` (optimized, ``m_0 = 1``).  Builds the dense matrix: for
    inspecting small cases; simulations stream the noise (:func:`noise_stream`).

    Parameters
    ----------
    name : str
        ``"identity"`` (or ``"gaussian"``), ``"sqrt_toeplitz"`` or ``"banded:<k>"``.
    steps : int
        ``T``.

    Returns
    -------
    numpy.ndarray
        The ``T×T`` matrix ``M``.

    Examples
    --------
    >>> from dpsim.privacy.mf import strategy
    >>> strategy("sqrt_toeplitz", 3)
    array([[1.   , 0.   , 0.   ],
           [0.5  , 1.   , 0.   ],
           [0.375, 0.5  , 1.   ]])
    """
    steps = _check_steps(steps)
    return toeplitz_matrix(toeplitz_coefficients(name, steps), steps)


def _check_square(M) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"strategy matrix must be square and non-empty, got shape {M.shape}")
    return M


def sensitivity(M) -> float:
    """Single-participation ℓ2 sensitivity of ``M X``: the largest column norm ``max_j ||M_{:,j}||₂``
    (one example changes one row of ``X`` by a vector of norm ≤ 1).

    Parameters
    ----------
    M : numpy.ndarray
        A strategy matrix.

    Returns
    -------
    float
        The largest column norm.
    """
    M = _check_square(M)
    return float(np.sqrt((M * M).sum(axis=0)).max())


def worst_case_sensitivity(M) -> float:
    """Sensitivity of ``M X`` when one example may participate in ANY subset of steps (Poisson
    sampling gives no participation bound), per unit clip norm.

    The change is ``M G`` with rows ``g_j`` (``||g_j|| ≤ 1``, zero off the participation set), and
    ``||M G||_F² = Σ_{ij} (MᵀM)_{ij} g_i·g_j``.

      * ``M ≥ 0`` entrywise: then ``MᵀM ≥ 0`` and the maximum is attained by all ``g_j`` equal unit
        vectors, i.e. all columns: **exact** value ``||M·1||₂``.
      * otherwise: the triangle-inequality bound ``Σ_j ||M_{:,j}||₂`` (a valid upper bound, in
        general not tight).

    Parameters
    ----------
    M : numpy.ndarray
        A strategy matrix.

    Returns
    -------
    float
        The sensitivity per unit clip norm (exact for M ≥ 0, else an upper bound).
    """
    M = _check_square(M)
    if np.all(M >= 0):
        return float(np.linalg.norm(M.sum(axis=1)))
    return float(np.sqrt((M * M).sum(axis=0)).sum())


def prefix_rmse(M) -> float:
    """Prefix-sum RMSE of the factorization ``A = B M``, ``B = A M⁻¹``, with noise scaled by
    ``sens(M)``: ``sens(M) · ||A M⁻¹||_F / √T`` (root-mean over the T prefix sums of the
    per-coordinate noise variance at unit noise scale; identity gives ``√((T+1)/2)``).
    ``M`` must be lower triangular with a non-zero diagonal.

    Parameters
    ----------
    M : numpy.ndarray
        A lower-triangular strategy matrix.

    Returns
    -------
    float
        The prefix-sum RMSE at unit noise scale.
    """
    from scipy.linalg import solve_triangular

    M = _check_square(M)
    if np.any(np.triu(M, 1) != 0):
        raise ValueError("strategy matrix must be lower triangular")
    if np.any(np.diag(M) == 0):
        raise ValueError("strategy matrix must have a non-zero diagonal (invertible)")
    T = M.shape[0]
    A = prefix_sum_matrix(T)
    Bt = solve_triangular(M, A.T, trans="T", lower=True)  # Mᵀ Bᵀ = Aᵀ
    return sensitivity(M) * float(np.linalg.norm(Bt)) / math.sqrt(T)


# ----------------------------------------------------------------------------------------------
# streaming
# ----------------------------------------------------------------------------------------------
class IdentityNoiseState(NamedTuple):
    shape: tuple  # shape of each draw, e.g. (R, d)
    t: int  # steps taken so far


class BandedNoiseState(NamedTuple):
    ring: Any  # (k−1, *shape) backend array: u_s = sens·y_s at slot s mod (k−1), last k−1 steps (0 before)
    coef: Any  # (k−1, k−1) backend array: row p = feedback coefficients aligned with the ring slots
    shape: tuple  # shape of each draw, e.g. (R, d)
    t: int  # steps taken so far


class HistoryNoiseState(NamedTuple):
    z: Any  # (T, *shape) backend array; rows 0..t−1 hold Z_0..Z_{t−1}
    coef: Any  # (T,) backend array: sens · (r_{T−1}, …, r_1, r_0) (reversed M⁻¹ coefficients)
    t: int  # steps taken so far


class NoiseStream:
    """Streams unit-scale DP-MF noise ``u_t = sens(M) · (M⁻¹ Z)_t`` for ``t = 1..T``.

    Build with :func:`noise_stream`.  ``init(shape, backend) -> state``; ``next(state, backend) ->
    (u, state)`` draws ``Z_t = backend.normal(shape)`` once and returns a fresh backend array ``u``
    of ``shape``.  Attributes: ``name``, ``steps``, ``kind`` (``"identity"``, ``"banded"``,
    ``"history"``), ``sens`` (single-participation sensitivity), ``worst_sens``
    (:func:`worst_case_sensitivity`), ``bandwidth`` (:func:`toeplitz_bandwidth`), ``strategy_coefficients`` (Toeplitz coefficients of ``M``),
    ``inverse_coefficients`` (of ``M⁻¹``, length T), ``prefix_rmse``, ``step_variance`` ((T,)
    per-step variance of ``u``), ``max_bytes``.
    """

    def __init__(self, name: str, steps: int, coefs: np.ndarray, kind: str, max_bytes: int):
        self.name = name
        self.steps = steps
        self.kind = kind
        self.max_bytes = max_bytes
        c = np.array(coefs, dtype=float)
        c.setflags(write=False)
        self.strategy_coefficients = c
        self.sens = toeplitz_sensitivity(c, steps)
        self.worst_sens = toeplitz_worst_case_sensitivity(c, steps)
        self.bandwidth = toeplitz_bandwidth(c, steps)
        if name == "sqrt_toeplitz":
            r = sqrt_toeplitz_inverse_coefficients(steps)
        else:
            r = inverse_coefficients(c, steps)
        r.setflags(write=False)
        self.inverse_coefficients = r
        self.prefix_rmse = toeplitz_prefix_rmse(c, steps, inverse=r)
        sv = toeplitz_step_variance(c, steps, inverse=r)
        sv.setflags(write=False)
        self.step_variance = sv
        # IIR: y_t = Z_t / m_0 − Σ_j (m_j/m_0) y_{t−j};   u_t = sens · y_t
        self._inv_m0 = 1.0 / float(c[0])
        fb = c[1:] / float(c[0])
        nb = fb.size
        # y_{t−j} (j = 1..k−1) sits in ring slot (t − j) mod (k−1); for phase p = t mod (k−1) the
        # coefficient of slot (p − j) mod (k−1) is fb_j, so y_t = Z_t/m_0 − ⟨coef[p], ring⟩.
        self._ring_coef = None
        if kind == "banded" and nb:
            p = np.arange(nb)[:, None]
            j = np.arange(1, nb + 1)[None, :]
            ring_coef = np.zeros((nb, nb))
            ring_coef[np.broadcast_to(p, (nb, nb)), (p - j) % nb] = np.broadcast_to(fb, (nb, nb))
            self._ring_coef = ring_coef

    def __repr__(self):
        return (f"NoiseStream(name={self.name!r}, steps={self.steps}, kind={self.kind!r}, "
                f"sens={self.sens:.6g}, worst_sens={self.worst_sens:.6g})")

    # -- privacy ------------------------------------------------------------------------------
    def equivalent_noise_multiplier(self, noise_multiplier: float, participation: str = "single") -> float:
        """Noise multiplier of the ONE Gaussian mechanism the whole run is equivalent to.

        ``participation="single"``: ``σ`` (each example in at most one step).
        ``participation="any"``: ``σ · sens / worst_sens`` (any participation pattern; no
        amplification).  The amplified cyclic-Poisson bound is not one Gaussian mechanism but
        ``⌈T/k⌉`` subsampled ones at ``σ``, valid when :meth:`amplifiable` (module docstring).

        Parameters
        ----------
        noise_multiplier : float
            σ.
        participation : {'single', 'any'}
            The participation pattern.

        Returns
        -------
        float
            The equivalent noise multiplier.
        """
        if participation == "single":
            return float(noise_multiplier)
        if participation == "any":
            return float(noise_multiplier) * self.sens / self.worst_sens
        raise ValueError(f"participation must be 'single' or 'any', got {participation!r}")

    def amplifiable(self, groups: int) -> bool:
        """True when cyclic Poisson sampling with ``groups`` groups amplifies this strategy:
        ``bandwidth ≤ groups`` (each example's column blocks are disjoint; module docstring).

        Parameters
        ----------
        groups : int
            Number of cyclic Poisson groups.

        Returns
        -------
        bool
            Whether the amplified bound applies.
        """
        return self.bandwidth <= int(groups)

    # -- memory -------------------------------------------------------------------------------
    def state_bytes(self, shape, itemsize: int = 8) -> int:
        """Bytes of backend arrays the stream keeps between steps for draws of ``shape``.

        Parameters
        ----------
        shape : tuple of int
            The draw shape.
        itemsize : int
            Bytes per element.

        Returns
        -------
        int
            Bytes.
        """
        size = int(np.prod(shape, dtype=np.int64))
        if self.kind == "history":
            return self.steps * size * itemsize
        if self.kind == "banded":
            return (self.strategy_coefficients.size - 1) * size * itemsize
        return 0

    # -- streaming ----------------------------------------------------------------------------
    def init(self, shape, backend):
        """Fresh state for draws of ``shape`` (e.g. ``(R, d)``) on ``backend``.

        Parameters
        ----------
        shape : tuple of int
            The draw shape.
        backend : Backend
            Where the draws are made.

        Returns
        -------
        object
            The stream's state.
        """
        shape = tuple(int(s) for s in shape)
        itemsize = np.dtype(backend.dtype).itemsize
        need = self.state_bytes(shape, itemsize)
        if need > self.max_bytes:
            if self.kind == "history":
                what = f"history buffer (steps·R·d·{itemsize} bytes)"
                hint = " use noise='banded:<k>' (O(k·R·d) memory, e.g. banded:64) or fewer steps/trials"
            else:
                what = f"ring buffer ((bands−1)·R·d·{itemsize} bytes)"
                hint = " use fewer bands or trials"
            raise ValueError(
                f"noise {self.name!r} for steps={self.steps} and shape={shape} needs a "
                f"{need / 2**30:.3g} GiB {what}, above max_bytes={self.max_bytes} "
                f"({self.max_bytes / 2**30:.3g} GiB);{hint}"
            )
        if self.kind == "identity":
            return IdentityNoiseState(shape=shape, t=0)
        xp = backend.xp
        if self.kind == "banded":
            nb = self.strategy_coefficients.size - 1
            if nb == 0:
                return BandedNoiseState(ring=None, coef=None, shape=shape, t=0)
            ring = xp.zeros((nb,) + shape, dtype=backend.float_dtype)
            return BandedNoiseState(ring=ring, coef=backend.asarray(self._ring_coef), shape=shape, t=0)
        z = xp.zeros((self.steps,) + shape, dtype=backend.float_dtype)
        coef = backend.asarray(np.ascontiguousarray(self.sens * self.inverse_coefficients[::-1]))
        return HistoryNoiseState(z=z, coef=coef, t=0)

    def next(self, state, backend):
        """One step: ``(u_t, new_state)``; ``u_t`` is a fresh array of the state's shape.

        Parameters
        ----------
        state : object
            The stream's state.
        backend : Backend
            Where the draws are made.

        Returns
        -------
        tuple
            ``(u_t, new_state)``.
        """
        t = state.t
        if t >= self.steps:
            raise ValueError(
                f"noise stream {self.name!r} was built for steps={self.steps} and is exhausted "
                f"(asked for step {t + 1})"
            )
        if self.kind == "identity":
            return backend.normal(state.shape), IdentityNoiseState(shape=state.shape, t=t + 1)
        if self.kind == "banded":
            return self._next_banded(state, backend)
        return self._next_history(state, backend)

    def _next_banded(self, state, backend):
        xp = backend.xp
        t = state.t
        u = backend.normal(state.shape)  # fresh Z_t, owned here: scaled in place
        scale = self.sens * self._inv_m0
        # the ring holds u_s = sens·y_s, which obeys the same recurrence with input sens·Z/m_0
        if state.ring is not None and _host_float64(u, state.ring, state.coef):
            # one pass: u·scale − Σ_j (m_j/m_0) u_{t−j}, stored in u and in the ring slot (the
            # NumPy expressions below take five passes over (R, d) and a temporary)
            p = t % state.ring.shape[0]
            _banded_feedback(u.reshape(-1), scale, state.coef[p],
                             state.ring.reshape(state.ring.shape[0], -1), p)
            return u, state._replace(t=t + 1)
        if scale != 1.0:
            u *= scale
        if state.ring is None:  # a single coefficient m_0 ≠ 1: u = sens · Z / m_0
            return u, state._replace(t=t + 1)
        p = t % state.ring.shape[0]
        u -= xp.tensordot(state.coef[p, :], state.ring, axes=1)  # Σ_j (m_j/m_0) u_{t−j}, one pass
        state.ring[p, ...] = u  # a copy; overwrites u_{t−(k−1)}, no longer needed
        return u, state._replace(t=t + 1)

    def _next_history(self, state, backend):
        xp = backend.xp
        t = state.t
        zt = backend.normal(state.z.shape[1:])
        state.z[t, ...] = zt
        coef = state.coef[self.steps - 1 - t:]  # sens · (r_t, …, r_0)
        u = xp.tensordot(coef, state.z[: t + 1, ...], axes=1)
        return u, HistoryNoiseState(z=state.z, coef=state.coef, t=t + 1)


def _host_float64(*arrays) -> bool:
    """Every array a C-contiguous host NumPy float64 array (the kernel below applies)."""
    return all(isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous
               for a in arrays)


#: Elements per block of :func:`_banded_feedback` (its feedback sum stays in L1).
_BANDED_BLOCK = 512


@numba.njit(cache=True, nogil=True)
def _banded_feedback(u, scale, coef, ring, p):
    """``u ← u·scale − Σ_j coef[j]·ring[j]`` and ``ring[p] ← u`` in one pass, block by block: the
    banded IIR step ``u_t = sens·Z_t/m_0 − Σ_j (m_j/m_0) u_{t−j}`` (module docstring) on flat
    float64 arrays (``u`` and each ``ring[j]`` of length ``R·d``).  The feedback sum runs over the
    ring slots in order, each product rounded and added in turn (a multiply, then an add);
    ``x·1.0`` is ``x``, so ``scale = 1`` needs no branch."""
    nb = ring.shape[0]
    n = u.shape[0]
    acc = np.empty(_BANDED_BLOCK)
    for lo in range(0, n, _BANDED_BLOCK):
        m = min(_BANDED_BLOCK, n - lo)
        c0 = coef[0]
        for e in range(m):
            acc[e] = c0 * ring[0, lo + e]
        for j in range(1, nb):
            cj = coef[j]
            for e in range(m):
                acc[e] = acc[e] + cj * ring[j, lo + e]
        for e in range(m):
            x = u[lo + e] * scale - acc[e]
            u[lo + e] = x
            ring[p, lo + e] = x


def noise_stream(noise, steps: int, *, max_bytes: int = DEFAULT_MAX_BYTES) -> NoiseStream:
    """A :class:`NoiseStream` for ``noise`` over ``steps`` = T steps.

    ``noise``: ``"gaussian"``/``"identity"`` (plain i.i.d. draws, bit-identical to DP-SGD),
    ``"sqrt_toeplitz"`` (exact, Z-history buffer of ``T·R·d`` floats), ``"banded:<k>"`` (IIR filter
    with ``k−1`` arrays of state), or a 1-D sequence of Toeplitz coefficients ``m_0, …, m_{k−1}`` of a
    custom lower-triangular Toeplitz strategy (streamed by the IIR filter).  ``max_bytes`` caps the
    memory the stream keeps (checked at ``init`` when the draw shape is known; default 2 GiB).

    Parameters
    ----------
    noise : str or array_like
        A noise name or custom Toeplitz coefficients.
    steps : int
        ``T``.
    max_bytes : int
        Cap on the memory the stream keeps.

    Returns
    -------
    NoiseStream
        The stream.
    """
    steps = _check_steps(steps)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative integer, got max_bytes={max_bytes!r}")
    if isinstance(noise, str):
        kind, k = parse_noise(noise)
        coefs = toeplitz_coefficients(noise, steps)
        name = noise
    else:
        if noise is None or np.ndim(noise) != 1:
            parse_noise(noise)  # raises, naming the value
        try:
            coefs = _trim(np.asarray(noise, dtype=float), steps)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"custom Toeplitz noise coefficients are invalid ({exc}); got {noise!r}") from None
        kind = "custom"
        name = f"toeplitz[{coefs.size}]"
    if coefs.size == 1 and coefs[0] == 1.0:  # identity, banded:1, T = 1: u = Z exactly
        mode = "identity"
    elif kind == "sqrt_toeplitz":
        mode = "history"
    else:
        mode = "banded"
    return NoiseStream(name, steps, coefs, mode, int(max_bytes))
