"""The small-d block kernel: every step between two records in one compiled Numba call.

The general engine pays Python per step and materializes a few ``(R, d)`` temporaries per piece;
for small ``d`` that, not arithmetic, is the cost.  Here the step loop runs inside one kernel from
one record step to the next, batches and noise included:

    for t in block:                                       (step-major, as the engine)
        B_r ~ sampler (sizes of all trials first, then trial by trial: Floyd's subset)
        for r in trials:
            S_r = Σ_{i∈B_r} clip(s_r ⊙ g_i(w_r), C_r)       (the problem's clipped sum, dpsim.fast.rows)
            g̃_r = (S_r + σ_r C_r z_{t,r}) / b                (z: d normals of the noise stream)
            u   = e_k(… e_1(g̃_r) …)                          (the chain's elements, composed)
            w_r ← proj_X(w_r + u)

**Composed from the chain, not recognized by name.**  The kernel's per-coordinate update is the
chain's own elements (:mod:`dpsim.transforms.elements`) composed by :func:`dpsim.fast.compose.body`
for the chain's *structure key*; the step loop is compiled once per ``(shape, key)`` and cached on
disk under the key and the fingerprint of the rules' sources.  A chain whose pieces compose
(:func:`dpsim.fast.compose.composition`: a Gaussian privatizer with i.i.d. noise or
``mean_gradient``, then pieces with elements) takes this path whoever built it — a registered
optimizer, a user's chain, a renamed twin.  Two other shapes have a driver here:
:class:`~dpsim.transforms.elements.Delayed`, derived from the pieces of DP²'s ``alternate``
(:func:`dpsim.fast.compose.delayed`), in DP²'s own arrangement with i.i.d. noise (the refresh of
``v`` is the chain's own ``refresh`` function, called
between blocks — a block ends before each refresh step; the preconditioned phase's clipped sum of
the batch scaled by ``s = 1/(√max(v, 0) + ε)``, ``s`` computed by the chain's expression) and
:class:`~dpsim.transforms.elements.Ellipsoid`, derived from the pieces of PAGAN/PASAN
(:func:`dpsim.fast.compose.ellipsoid`; PAGAN: the privatizer's projected sum, its noise, then the
chain's remaining elements; PASAN's per-norm accumulator has no per-coordinate element — its
parts are a :class:`~dpsim.transforms.elements.PerNorm` — so its two lines are written in
:func:`_pasan_row`).  :func:`plan` says why anything else is not covered.

**Same random streams as the engine, bit for bit.**  The kernel draws from the run's two NumPy
generators — the sampler's and the backend's noise generator, both ``Generator(PCG64)`` — through
:mod:`dpsim._bitgen`: before a block their states are read into arrays, the kernel draws with an
inlined copy of NumPy's PCG64 and of its ``binomial``, ``random``, ``integers`` and
``standard_normal`` algorithms, and after the block the states are written back, so the
generators stand exactly where NumPy's own draws would have left them.  (Numba's compiled
``Generator`` methods draw the same streams through a function pointer per draw;
``DPSIM_FUSED_RNG=numba`` selects them, for A/B checks, and they are used for any other bit
generator.)  The draws come in the engine's order: per step the ``R`` batch sizes, then per trial
its uniforms and Floyd's subset (or its bounded integers, sampling with replacement); the noise
generator gives per trial ``d`` normals, the C order of the engine's ``(R, d)`` draw.  The
arithmetic is the engine's (clipped sums with its summation order, :mod:`dpsim.fast.rows`; the
noisy mean as :func:`dpsim.privacy.noise.add_noise`; the elements themselves), and every constant
is computed by the piece's own Python code (Adam's ``1 − βᵗ`` per step, DP-AdamBC's Φ and γ'), so
the run is the chain's to the last bit (``tests/fast/test_fused.py``).  The chain state is rebuilt with
the pieces' own state types at record steps and at the end, so probes and the privacy record are
computed by the engine's code.  Problems: dense GLMs, ``random_quadratic``, ``quadratic_2d``;
domains none, box or ball; all four samplers; backend ``numpy``, ``float64``.
"""

from __future__ import annotations

import math
import os
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import types
from numba.extending import overload
from numba.np.unsafe.ndarray import to_fixed_tuple

from .. import _bitgen as _BG
from ..problems import Ball, Box
from ..problems.base import GLMView, NoisyQuadraticView, QuadraticView
from ..sampling import CYCLIC, cyclic_rate
from ..transforms.base import Batch
from ..transforms.elements import Delayed, Element, Ellipsoid, table
from . import compose
from .compose import lr_factor as _factor
from .release_kernels import _row_sum
from .rows import (D_BALL, D_BOX, D_NONE, P_GLM, P_NQUAD, P_RQUAD, S_CYCLIC, S_FIXED, S_POISSON,
                   S_REPLACEMENT, _ball_dense_trial, _draw_batch, _ellipsoid_trial,
                   _glm_clipped_trial, _glm_scaled_trial, _project_domain, _quad_trial,
                   _row_abs_max, _row_sq_norms, _scratch)

__all__ = ["plan", "run", "BlockPlan", "BLOCK_ELEMENTS", "RNG_ENV"]

# driver shapes
COMPOSED, DELAYED, ELLIPSOID = 0, 1, 2

#: A kernel call (a block) runs at most this many trial-numbers, ``K·R·(d + b)``, before it
#: returns to Python (keeps progress bars and Ctrl-C responsive in runs without records; the
#: blocks hold no buffers, so this costs one call per block).
BLOCK_ELEMENTS = 1 << 22


# ------------------------------------------------------------------------------------------------
# the rows: the chain's elements on a trial's release (resolved from the literal key)


def _update_row(key, out, z, noisy, sd, fb, fbi, recip, slots, Kc, kk, r, W):  # pragma: no cover
    raise NotImplementedError  # replaced by the overload in compiled code


def _structure(KEY):
    """The structure key of a step loop's ``KEY`` (``"<shape>:<key>#<fingerprint>"``)."""
    return KEY.split("#")[0].split(":", 1)[1]


def _consts_fn(nk):
    """``consts(Kc, kk, r)``: trial ``r``'s constants of step ``kk`` as a tuple of ``nk``."""
    if nk == 0:
        def consts(Kc, kk, r):
            return ()
    else:
        def consts(Kc, kk, r):
            return to_fixed_tuple(Kc[kk, r if Kc.shape[1] > 1 else 0], nk)
    return numba.njit(inline="always")(consts)


@overload(_update_row, prefer_literal=True, inline="always")
def _update_row_impl(key, out, z, noisy, sd, fb, fbi, recip, slots, Kc, kk, r, W):
    """Trial ``r``'s row: per coordinate the noisy mean ``g̃ = (z·σC + S)/b`` (as
    :func:`dpsim.privacy.noise.add_noise`; ``·(1/b)`` for a power of two ``b``, the same number),
    the elements of the literal structure ``key`` in chain order (:func:`dpsim.fast.compose.body`,
    each updating its slots), and ``w ← w + u``."""
    if not isinstance(key, types.StringLiteral):
        return None
    body, _, nk = compose.body(_structure(key.literal_value))
    consts = _consts_fn(nk)

    def impl(key, out, z, noisy, sd, fb, fbi, recip, slots, Kc, kk, r, W):
        d = W.shape[1]
        k = consts(Kc, kk, r)
        for j in range(d):
            if noisy:
                x = z[j] * sd + out[r, j]
            else:
                x = out[r, j]
            gt = x * fbi if recip else x / fb
            W[r, j] = W[r, j] + body(gt, slots, k, r, j)
    return impl


def _ellipsoid_row(key, out, z, ens, noisy, fb, fbi, recip, slots, Kc, kk, r, W):  # pragma: no cover
    raise NotImplementedError  # replaced by the overload in compiled code


@overload(_ellipsoid_row, prefer_literal=True, inline="always")
def _ellipsoid_row_impl(key, out, z, ens, noisy, fb, fbi, recip, slots, Kc, kk, r, W):
    """PAGAN's row: the privatizer's release ``ĝ = Σπ(g_i)/b + z ⊙ σ`` (``σ = ens[r]`` or
    ``ens[0]``; the privatizer's expression and order), then the chain's remaining elements
    (AdaGrad with the max guard, the learning rate) and ``w ← w + u``."""
    if not isinstance(key, types.StringLiteral):
        return None
    body, _, nk = compose.body(_structure(key.literal_value))
    consts = _consts_fn(nk)

    def impl(key, out, z, ens, noisy, fb, fbi, recip, slots, Kc, kk, r, W):
        d = W.shape[1]
        er = 0 if ens.shape[0] == 1 else r
        k = consts(Kc, kk, r)
        for j in range(d):
            x = out[r, j] * fbi if recip else out[r, j] / fb
            if noisy:
                x = x + z[j] * ens[er, j]
            W[r, j] = W[r, j] + body(x, slots, k, r, j)
    return impl


@numba.njit(cache=True, error_model="numpy")
def _pasan_row(out, z, ens, noisy, fb, fbi, recip, V, W, eps_r, neglr_r, sq, r):
    """PASAN's row ([PAGAN] Alg. 1): the privatizer's release as in :func:`_ellipsoid_row`, then
    its per-norm AdaGrad step ``V += ||ĝ||²``, ``w += (ĝ / max(√V, ε))·(−η)`` — the
    per-norm accumulator has no per-coordinate element, so these lines are its chain's
    expressions written out (``||ĝ||²`` summed as NumPy sums a row, :func:`_row_sum`)."""
    d = W.shape[1]
    er = 0 if ens.shape[0] == 1 else r
    for j in range(d):
        x = out[r, j] * fbi if recip else out[r, j] / fb
        if noisy:
            x = x + z[j] * ens[er, j]
        out[r, j] = x
        sq[j] = x * x
    v = V[r, 0] + _row_sum(sq)
    V[r, 0] = v
    den = max(math.sqrt(v), eps_r)
    for j in range(d):
        W[r, j] = W[r, j] + (out[r, j] / den) * neglr_r


# ------------------------------------------------------------------------------------------------
# the kernel's arguments


class Draws(NamedTuple):
    """The sampler's side of a block: its kind code, the ``n`` (per cyclic group) and ``q`` it
    draws with, the number of cyclic groups, the private rows (empty: all), Σ batch sizes."""

    sk: int
    n_all: Any
    p_all: Any
    kcyc: int
    private_idx: Any
    bsum: Any


class ProblemArgs(NamedTuple):
    """The problem as the kernel reads it (from :meth:`dpsim.problems.Problem.kernel_view`;
    dummies of the right types for the other kinds) and the domain's code and radius."""

    pk: int
    X: Any
    rn2: Any
    xmax: Any
    y: Any
    link: int
    reg: float
    Wq: Any
    Yq: Any
    h: Any
    xi: Any
    qreg: float
    dk: int
    drad: float
    vals: Any
    cols: Any
    ptr: Any
    dense_d: int


class Hyper(NamedTuple):
    """The releases' per-trial values ``(R,)`` (DP²: ``2`` for the preconditioned phase) and the
    shapes' switches; the elements' constants come apart (``Kc``)."""

    b: int
    noisy: bool
    clip: Any
    clip2: Any
    std: Any
    std2: Any
    neglr: Any
    neglr2: Any
    eps: Any
    s1: int
    s2: int
    per_norm: bool


class BlockState(NamedTuple):
    """Parameters ``W``, the elements' slots (a tuple of ``(R, d)`` arrays, in chain order), DP²'s
    accumulator ``G`` and scale ``S``, PASAN's per-norm accumulator ``V`` (updated in place)."""

    W: Any
    slots: Any
    G: Any
    S: Any
    V: Any


class EllipsoidArgs(NamedTuple):
    """PASAN/PAGAN's ellipsoid (from the privatizer's state) and the projected fractions."""

    Amat: Any
    SA: Any
    ISA: Any
    arow: Any
    const_a: Any
    ens: Any
    frac: Any


class Scratch(NamedTuple):
    """Work arrays the block reuses (no allocation per step)."""

    out: Any
    g: Any
    pv: Any
    uu: Any


# ------------------------------------------------------------------------------------------------
# the step loop


def _make_run_steps(KEY):
    """The step loop for ``KEY`` = ``"<shape>:<structure key>#<fingerprint>"``: the shape a
    closure constant (each shape's machine code holds only its own branches), the structure key
    resolved into the composed elements when the loop is compiled.  Numba caches the loop on disk
    under the hash of its closure, i.e. of ``KEY``, whose fingerprint changes with the rules'
    source files (:func:`dpsim.fast.compose.fingerprint`)."""
    shape = int(KEY.split(":")[0])

    @numba.njit(cache=True)
    def run_steps(t0, K, step0, srng, nrng, Kc, dr, pr, hy, st, el, sc):
        """Steps ``t0 + 1 … t0 + K`` of the engine loop, batches and noise included, in place on
        the parameters and the state arrays of ``st`` and on ``bsum`` (Σ batch sizes).  Random
        draws in the engine's order (see the module docstring); ``srng``/``nrng`` are PCG64
        state arrays (:mod:`dpsim._bitgen`) or the ``Generator`` objects themselves.  ``Kc``: the
        elements' constants, ``(K or 1, R or 1, n)``."""
        sk, n_all, p_all, kcyc, private_idx, bsum = dr
        (pk, X, rn2, xmax, y, link, reg, Wq, Yq, h, xi, qreg, dk, drad, vals, cols, ptr,
         dense_d) = pr
        b, noisy, clip, clip2, std, std2, neglr, neglr2, eps, s1, s2, per_norm = hy
        W, slots, G, S, V = st
        Amat, SA, ISA, arow, const_a, ens, frac = el
        out, g, pv, uu = sc
        R, d = W.shape
        fb = float(b)
        # b a power of two: x / b and x · (1/b) are the same number (the exact x·2^-k rounded
        # once, subnormal, infinite and NaN results included), and a product costs less
        recip = b > 0 and (b & (b - 1)) == 0
        fbi = 1.0 / fb
        cycle = s1 + s2
        n = n_all[0]
        sizes = np.empty(R, dtype=np.int64)
        cap = 16
        # the ℓ2-ball kernel pads a batch to a multiple of eight lanes: ib has room for 8 more, and
        # its scratch (the transposed rows XT, five vectors sc) is only allocated when it runs
        ball = shape == ELLIPSOID and pk == P_GLM
        ib, XT, bsc, ub, lam, mm, cf, yb, sb = _scratch(cap, d if ball else 0)
        bits = np.zeros((n + 63) // 64, dtype=np.uint64)
        z = np.zeros(d)
        nomask = np.ones((1, 1), dtype=np.bool_)
        bn = -1  # the n of the binomial set-up held in bp, btab (p_all[0] is fixed in a call)
        bp = _BG.binomial_setup(0, 0.0)
        btab = _BG.binomial_table(bp)
        for k in range(K):
            t = t0 + k + 1
            kk = k if Kc.shape[0] > 1 else 0
            # -- the step's batch sizes (all trials first, as Sampler.draw does)
            grp = 0
            n_s = n
            if sk == S_CYCLIC:
                grp = (step0 + k) % kcyc
                n_s = n_all[grp]
            kmax = b
            if sk == S_POISSON or sk == S_CYCLIC:
                if n_s != bn:  # NumPy's binomial_t and BTPE's ratios: once per (n, p)
                    bn = n_s
                    bp = _BG.binomial_setup(n_s, p_all[0])
                    btab = _BG.binomial_table(bp)
                kmax = 0
                for r in range(R):
                    sizes[r] = _BG.draw_binomial(srng, bp, btab)
                    if sizes[r] > kmax:
                        kmax = sizes[r]
            elif sk == S_FIXED:
                for r in range(R):
                    sizes[r] = b
            if kmax > cap:
                cap = max(kmax, 2 * cap)
                ib, XT, bsc, ub, lam, mm, cf, yb, sb = _scratch(cap, d if ball else 0)
            phase2 = False
            if shape == DELAYED:
                phase2 = (t - 1) % cycle >= s1
            Cv = clip2 if phase2 else clip
            for r in range(R):
                kr = _draw_batch(sk, srng, n_s, sizes, r, kcyc, grp, b, bits, ub, ib, private_idx)
                bsum[r] += kr
                if noisy:
                    for j in range(d):
                        z[j] = _BG.draw_normal(nrng)
                if shape == ELLIPSOID:
                    if ball and const_a[arow[r]] >= 0.0:
                        nproj = _ball_dense_trial(link, X, xmax, ib, kr, W, y, const_a[arow[r]], reg,
                                                  out, XT, bsc, r)
                    else:
                        _ellipsoid_trial(pk, ib, kr, W, Wq, Yq, h, xi, qreg, vals, cols, ptr,
                                         dense_d, y, link, reg, Amat, SA, ISA, arow, const_a, out,
                                         lam, nomask, g, pv, uu, r)
                        nproj = 0
                        for i in range(kr):
                            if lam[0, i] > 0:
                                nproj += 1
                    frac[r] = nproj / max(kr, 1)
                    if per_norm:
                        _pasan_row(out, z, ens, noisy, fb, fbi, recip, V, W, eps[r], neglr[r], uu, r)
                    else:
                        _ellipsoid_row(KEY, out, z, ens, noisy, fb, fbi, recip, slots, Kc, kk, r, W)
                    _project_domain(W, r, dk, drad)
                    continue
                if pk == P_GLM and not phase2:
                    _glm_clipped_trial(link, X, rn2, ib, kr, W, y, reg, Cv[r], out, mm, cf, yb, sb, r)
                elif pk == P_GLM:  # the clipped sum of the scaled batch (g: scratch for s²)
                    _glm_scaled_trial(link, X, ib, kr, W, S, y, reg, Cv[r], out, mm, cf, yb, sb, g, r)
                else:
                    _quad_trial(pk, ib, kr, W, S, phase2, Cv[r], Wq, Yq, h, xi, qreg, out, g, r)
                sd = std2[r] if phase2 else std[r]
                if shape == DELAYED:
                    # DP²'s two phases ([DP2] Alg. 1): G ← G + g̃ and w ← w − η g̃, or (the
                    # preconditioned release) w ← w − η₂ g̃
                    for j in range(d):
                        x = z[j] * sd + out[r, j] if noisy else out[r, j]
                        gt = x * fbi if recip else x / fb
                        if phase2:
                            u = gt * neglr2[r]
                        else:
                            G[r, j] = G[r, j] + gt
                            u = gt * neglr[r]
                        W[r, j] = W[r, j] + u
                else:
                    _update_row(KEY, out, z, noisy, sd, fb, fbi, recip, slots, Kc, kk, r, W)
                _project_domain(W, r, dk, drad)

    return run_steps


_RUN_STEPS: dict = {}


def _run_steps(KEY):
    """The compiled step loop for ``KEY`` (made once per process, compiled on its first call or
    loaded from Numba's cache)."""
    f = _RUN_STEPS.get(KEY)
    if f is None:
        f = _RUN_STEPS[KEY] = _make_run_steps(KEY)
    return f


# ------------------------------------------------------------------------------------------------
# planning: the chain's shape and structure, or why the block kernel does not cover the run


def _col(v, R):
    """A scalar or per-trial value (a list, an ``(R,)`` or ``(R, 1)`` array) as an ``(R,)`` float64 row."""
    return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.float64).reshape(-1), (R,)))


def _release_cols(rel, R):
    """``(clip, std)`` per trial ``(R,)`` of a :class:`~dpsim.transforms.elements.Release` (no
    clipping: ``inf``; no noise: zeros)."""
    clip = _col(np.inf if rel.clip is None else rel.clip, R)
    std = _col(rel.std if rel.noisy else 0.0, R)
    return clip, std


class BlockPlan:
    """A run the block kernel covers (:func:`plan`): the driver ``shape``, the structure ``key``
    of the composed elements, the pieces ``(name, element)`` that own the slots, the derived shape
    or composition ``spec``, the problem's kernel view and codes."""

    def __init__(self, problem, optimizer, R, shape, spec, key, pieces):
        self.problem, self.optimizer, self.R = problem, optimizer, R
        self.shape, self.spec, self.key, self.pieces = shape, spec, key, pieces

    def describe(self):
        return f"{self.optimizer.name} on {self.problem.name} ({self.key or 'driver'})"


def _rest(tx, start=1):
    """``(key, pieces)`` of the pieces of ``tx`` from ``start`` on when every one has an element,
    else the name of the first one without."""
    pieces = []
    for name, piece in tx.parts[start:]:
        if name is None or not isinstance(piece.element, Element):
            return name
        pieces.append((name, piece.element))
    return "|".join(e.key for _, e in pieces), tuple(pieces)


def _shape(tx):
    """``(shape, spec, key, pieces)`` of the transform ``tx``, or why the block kernel does not
    cover it (one sentence)."""
    spec = compose.spec(tx)
    if isinstance(spec, str):
        return spec
    if isinstance(spec, compose.Composition):
        if spec.release.source is not None:
            return "correlated noise (DP-MF) has no block kernel: it is drawn through the privatizer's noise source"
        if spec.stp_eps is not None:
            return "scale_then_privatize has no block kernel (its scale is recomputed from v every step)"
        return COMPOSED, spec, spec.key, spec.pieces
    if isinstance(spec, Delayed):
        if spec.order != "dp2":
            return f"DP²'s {spec.order!r} arrangement has no block kernel (only DP²'s own order)"
        if spec.rel1.noisy != spec.rel2.noisy:
            return "DP² phases that differ in whether they draw noise have no block kernel"
        return DELAYED, spec, "", ()
    if isinstance(spec, Ellipsoid):
        if spec.per_norm:
            return ELLIPSOID, spec, "", ()
        rest = _rest(tx)
        if not isinstance(rest, tuple):
            return f"its piece {rest!r} after the ellipsoid privatizer has no element"
        return ELLIPSOID, spec, rest[0], rest[1]
    return (f"its {type(spec).__name__} shape has no block kernel (the per-step fused "
            "release runs it)")


def plan(problem, optimizer, *, trials, backend="numpy", dtype="float64"):
    """A :class:`BlockPlan` when the block kernel covers this run, else a string saying why not."""
    if backend != "numpy" or dtype != "float64":
        return f"the block kernel runs on backend='numpy' with dtype='float64' (got {backend}/{dtype})"
    if optimizer.public_fraction:
        return "the run has a public split, which the block kernel does not read"
    found = _shape(optimizer.transform)
    if isinstance(found, str):
        return found
    P = BlockPlan(problem, optimizer, trials, *found)
    # -- problem: only through its kernel view (Problem.kernel_view)
    view = P.view = problem.kernel_view()
    if isinstance(view, GLMView):
        if view.sparse:
            return "sparse GLM features have no block kernel (the engine's CSR kernel is used)"
        P.pk = P_GLM
    elif isinstance(view, QuadraticView):
        P.pk = P_RQUAD
    elif isinstance(view, NoisyQuadraticView):
        P.pk = P_NQUAD
    else:
        return (f"problem {problem.name!r} has no kernel view (only the built-in GLMs and "
                "quadratics, not subclasses, have one)")
    dom = problem.domain
    if dom is None:
        P.dk, P.drad = D_NONE, 0.0
    elif isinstance(dom, Box):
        P.dk, P.drad = D_BOX, float(dom.radius)
    elif isinstance(dom, Ball):
        P.dk, P.drad = D_BALL, float(dom.radius)
    else:  # pragma: no cover - Problem only accepts Box/Ball
        return f"domain {dom!r} has no projection in the block kernel"
    return P


# ------------------------------------------------------------------------------------------------
# state ↔ arrays


class _Slots:
    """The composed pieces' state during a run: each slot a private C-contiguous float64 copy
    the kernel updates in place; each piece's state advanced by its element (every step for a
    varying element — Adam's count —, once a block otherwise); the constants of each step
    computed by the pieces' own ``consts``, as the chain computes them."""

    def __init__(self, pieces, state):
        self.pieces = pieces
        self.states = {name: state[name] for name, _ in pieces}
        self.arrays = {}
        for name, el in pieces:
            self.arrays[name] = tuple(np.array(getattr(state[name], f), dtype=np.float64, order="C")
                                      for f in el.slots)
        self.slots = tuple(a for name, _ in pieces for a in self.arrays[name])
        self.varying = any(el.varying for _, el in pieces)
        self._static = None

    def consts(self, ctx, K):
        """``(K or 1, R or 1, n)``: the constants of the block's ``K`` steps, advancing the
        pieces' states over the block."""
        if not self.varying:
            if self._static is None:
                self._static = self._row(ctx)[None]
            self._advance(False)
            return self._static
        rows = []
        scalar = True  # every constant a Python float: one array of all steps at the end
        for _ in range(K):
            cs = self._values(ctx)
            scalar = scalar and all(isinstance(c, float) for c in cs)
            rows.append(cs)
            self._advance(True)
        self._advance(False)
        if scalar and rows and rows[0]:
            return np.array(rows, dtype=np.float64).reshape(K, 1, len(rows[0]))
        return np.ascontiguousarray(np.stack([table(cs, np.float64) for cs in rows]))

    def _values(self, ctx):
        cs = []
        for name, el in self.pieces:
            cs.extend(el.consts(self.states[name], ctx))
        return cs

    def _row(self, ctx):
        return table(self._values(ctx), np.float64)

    def _advance(self, varying):
        for name, el in self.pieces:
            if el.varying == varying:
                self.states[name] = el.advance(self.states[name], self.arrays[name])

    def rebuild(self, state):
        """The chain state with copies of the slots (the pieces' own state types)."""
        new = dict(state)
        for name, el in self.pieces:
            new[name] = self.states[name]._replace(
                **{f: a.copy() for f, a in zip(el.slots, self.arrays[name])})
        return new


def _sampler_args(sampler):
    """``(kind code, n per group, rate, k)`` of a :class:`dpsim.sampling.Sampler` for the kernel:
    ``n_all`` holds ``n`` (or, for cyclic Poisson sampling, each group's size ``n_g``) and
    ``p_all[0]`` the inclusion rate, computed by the same expressions as ``Sampler.draw``."""
    n = sampler.n
    if sampler.kind == CYCLIC:
        k = sampler.k
        n_all = np.array([(n - g + k - 1) // k for g in range(k)], dtype=np.int64)
        return S_CYCLIC, n_all, np.array([cyclic_rate(sampler.b / n, k)]), k
    kind = {"poisson": S_POISSON, "fixed": S_FIXED, "replacement": S_REPLACEMENT}[sampler.sampling]
    return kind, np.array([n], dtype=np.int64), np.array([sampler.b / n]), 1


#: Environment switch for A/B checks: ``DPSIM_FUSED_RNG=numba`` makes the kernel draw through
#: Numba's compiled ``Generator`` methods (the reference path) instead of the inlined bit
#: generator of :mod:`dpsim._bitgen`; both give the same streams (``tests/fast/test_fused.py``).
RNG_ENV = "DPSIM_FUSED_RNG"


def _inline_rng(srng, nrng) -> bool:
    """Whether the kernel draws through :mod:`dpsim._bitgen` on state arrays: both generators
    are ``Generator(PCG64)`` (what it reproduces) and ``DPSIM_FUSED_RNG`` is not ``numba``."""
    mode = os.environ.get(RNG_ENV, "inline")
    if mode not in ("inline", "numba"):
        raise ValueError(f"{RNG_ENV} must be 'inline' or 'numba', got {mode!r}")
    return mode == "inline" and _BG.supports(srng) and _BG.supports(nrng)


def _problem_args(P, d):
    """:class:`ProblemArgs` from the problem's kernel view (dummies where unused)."""
    e1, e2, e3 = np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1, 1))
    ie1 = np.zeros(1, dtype=np.int64)
    X, y, link, reg = e2, e1, 0, 0.0
    vals, cols, ptr, dense_d = e1, ie1, ie1, 0
    Wq, Yq, h, xi, qreg = e3, e2, e1, e2, 0.0
    rn2 = xmax = e1
    view = P.view
    if P.pk == P_GLM:
        X, y = view.X, view.y
        rn2 = _row_sq_norms(X)
        link, reg = view.link, view.reg
        if P.shape == ELLIPSOID:  # the row layout of dpsim.privacy._ellipsoid.glm_projected_sum
            xmax = _row_abs_max(X)
            vals, cols, dense_d = X.reshape(-1), np.arange(d, dtype=np.int64), d
    elif P.pk == P_RQUAD:
        Wq, Yq, qreg = view.W, view.Y, view.reg_grad
    else:
        h, xi = view.h, view.xi
    return ProblemArgs(P.pk, X, rn2, xmax, y, link, reg, Wq, Yq, h, xi, qreg, P.dk, P.drad,
                       vals, cols, ptr, dense_d)


def _ellipsoid_args(P, state, R, d):
    """:class:`EllipsoidArgs` from the privatizer's state (set up at step 1); dummies else."""
    e1, e2 = np.zeros(1), np.zeros((1, 1))
    frac = np.zeros(R)
    if P.shape != ELLIPSOID:
        return EllipsoidArgs(e2, e2, e2, np.zeros(1, dtype=np.int64), e1, e2, frac), False
    es = state[P.spec.names[0]]
    Amat = np.ascontiguousarray(es.a, dtype=np.float64)
    SA = np.sqrt(Amat)
    with np.errstate(divide="ignore"):
        ISA = 1.0 / SA
    arow = (np.zeros(R, dtype=np.int64) if Amat.shape[0] == 1 else np.arange(R, dtype=np.int64))
    first = Amat[:, :1]
    const_a = np.ascontiguousarray(np.where(np.all(Amat == first, axis=1), first[:, 0], -1.0))
    noisy = es.noise_std is not None
    ens = e2
    if noisy:
        ens = np.ascontiguousarray(np.asarray(es.noise_std, dtype=np.float64).reshape(-1, d))
    if es.projected is not None:
        frac = np.array(es.projected, dtype=np.float64)
    return EllipsoidArgs(Amat, SA, ISA, arow, const_a, ens, frac), noisy


def _hyper(P, ctx, R, b, noisy_ellipsoid):
    """:class:`Hyper` of the plan's releases (the values the privatizers compute)."""
    z = np.zeros(R)
    sp = P.spec
    if P.shape == COMPOSED:
        clip, std = _release_cols(sp.release, R)
        return Hyper(b, sp.release.noisy, clip, clip, std, std, z, z, z, 1, 1, False)
    if P.shape == DELAYED:
        clip, std = _release_cols(sp.rel1, R)
        clip2, std2 = _release_cols(sp.rel2, R)
        return Hyper(b, sp.rel1.noisy, clip, clip2, std, std2, _col(_factor(sp.lr, ctx), R),
                     _col(_factor(sp.lr2, ctx), R), _col(ctx.hp(sp.eps), R), sp.s1, sp.s2, False)
    return Hyper(b, noisy_ellipsoid, z, z, z, z, _col(_factor(sp.lr, ctx), R), z,
                 _col(compose.guard(sp, ctx), R), 1, 1, sp.per_norm)


class _Delayed:
    """DP²'s delayed preconditioner during a run: the accumulator ``G`` (the kernel's, in place),
    the delayed ``v`` and the scale ``S`` of the preconditioned phase.  The refresh is the
    chain's own function (:attr:`Delayed.refresh`), called between blocks; ``S`` is
    ``1/(√max(v, 0) + ε)``, the expression of the chain's delayed-scale release."""

    def __init__(self, spec, state, R, d):
        q = state[spec.piece]
        self.spec, self.q = spec, q
        self.G = np.array(q.G, dtype=np.float64, order="C")
        self.S = np.ones((R, d))

    def refresh(self, ctx):
        sp = self.spec
        q = sp.refresh(self.q._replace(G=self.G), ctx)
        self.G[...] = q.G
        self.q = q._replace(G=None)
        self.S[...] = 1.0 / (np.sqrt(np.maximum(q.v, 0.0)) + ctx.hp(sp.eps))

    def rebuild(self, state):
        new = dict(state)
        new[self.spec.piece] = self.q._replace(G=self.G.copy())
        return new

    def block_end(self, t):
        """The last step a block from step ``t + 1`` may take: the one before the next refresh."""
        sp = self.spec
        cycle = sp.s1 + sp.s2
        return t + 1 + (sp.s1 - t - 1) % cycle

    def due(self, t):
        """Whether step ``t + 1`` starts with a refresh (the chain's switch to the adaptive phase)."""
        sp = self.spec
        return t % (sp.s1 + sp.s2) == sp.s1


def _first_step(P, state, params, sampler, private_idx, ctx, batch_sizes_sum):
    """Step 1 through the chain's own transform (PASAN/PAGAN: the privatizer sets up ``A`` and the
    noise scale from the problem, its checks and errors included)."""
    ctx.t = 1
    bi = sampler.draw()
    batch_sizes_sum += bi.sizes
    idx = bi.idx if private_idx is None else private_idx[bi.idx]
    batch = Batch(P.problem, params, idx, bi.mask, ctx.batch_size, None)
    updates, state = P.optimizer.transform.update(batch, state, params, ctx)
    params = params + updates
    if P.problem.has_domain:
        params = P.problem.project(params)
    return params, state


def run(P, *, params, state, steps, rec_steps, record, sampler, private_idx, backend, ctx,
        batch_sizes_sum, bar=None):
    """Steps ``1 … steps`` of the engine loop in blocks ending at record steps (and, for DP², before
    each refresh).  ``record(k, params, state)`` is the engine's recorder; ``params``/``state``
    the engine's initial ones (already recorded at step 0).  Returns ``(params, state)``."""
    R, d = params.shape
    b = ctx.batch_size
    t = 0
    next_rec = 1
    K_rec = rec_steps.size
    if P.shape == ELLIPSOID and state[P.spec.names[0]].a is None and steps > 0:
        params, state = _first_step(P, state, params, sampler, private_idx, ctx, batch_sizes_sum)
        t = 1
        if bar is not None:
            bar.update(1)
        if next_rec < K_rec and int(rec_steps[next_rec]) == 1:
            record(next_rec, params, state)
            next_rec += 1
    W = np.array(params, dtype=np.float64, order="C")
    parts = _Slots(P.pieces, state)
    dl = _Delayed(P.spec, state, R, d) if P.shape == DELAYED else None
    ell, noisy_e = _ellipsoid_args(P, state, R, d)
    V = np.zeros((1, 1))
    if P.shape == ELLIPSOID and P.spec.per_norm:
        V = np.array(state[P.spec.names[1]].v, dtype=np.float64, order="C")
    hyper_args = _hyper(P, ctx, R, b, noisy_e)
    dummy = np.zeros((1, 1))
    arrays = BlockState(W, parts.slots, dl.G if dl else dummy, dl.S if dl else dummy, V)
    sk, n_all, p_all, kcyc = _sampler_args(sampler)
    pidx = (np.zeros(0, dtype=np.int64) if private_idx is None
            else np.ascontiguousarray(private_idx, dtype=np.int64))
    bsum = np.zeros(R)
    draws = Draws(sk, n_all, p_all, kcyc, pidx, bsum)
    prob_args = _problem_args(P, d)
    scratch = Scratch(np.empty((R, d)), np.empty(d), np.empty(d), np.empty(d))
    srng, nrng = sampler.rng, backend._gen
    inline = _inline_rng(srng, nrng)
    kernel = _run_steps(f"{P.shape}:{P.key}#{compose.fingerprint(P.key)}")
    per_step = R * (d + b)

    def current(t):
        st = parts.rebuild(state) if P.pieces else dict(state)
        if dl is not None:
            st = dl.rebuild(st)
        if P.shape == ELLIPSOID:
            pname, qname = P.spec.names
            if P.spec.per_norm:
                st[qname] = st[qname]._replace(v=V.copy())
            st[pname] = st[pname]._replace(projected=ell.frac.copy())
        return st

    while t < steps:
        if dl is not None and dl.due(t):
            dl.refresh(ctx)
        stop = int(rec_steps[next_rec]) if next_rec < K_rec else steps
        if dl is not None:
            stop = min(stop, dl.block_end(t))
        # a block ends at the next record step, or earlier after BLOCK_ELEMENTS trial-numbers
        K = min(stop - t, max(1, BLOCK_ELEMENTS // per_step))
        Kc = parts.consts(ctx, K)
        if inline:  # the generators' states as arrays (one array when both are one generator)
            s_arg = _BG.state_of(srng)
            n_arg = s_arg if nrng is srng else _BG.state_of(nrng)
        else:
            s_arg, n_arg = srng, nrng
        try:
            kernel(t, K, sampler.step, s_arg, n_arg, Kc, draws, prob_args, hyper_args, arrays, ell,
                   scratch)
        finally:
            if inline:  # the generators continue exactly where NumPy's own draws would leave them
                _BG.store_state(srng, s_arg)
                if nrng is not srng:
                    _BG.store_state(nrng, n_arg)
        sampler.step += K
        t += K
        if bar is not None:
            bar.update(K)
        if next_rec < K_rec and t == int(rec_steps[next_rec]):
            ctx.t = t
            record(next_rec, W.copy(), current(t))
            next_rec += 1
    batch_sizes_sum += bsum
    ctx.t = steps
    return W, current(steps)
