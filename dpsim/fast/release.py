"""The per-step fused release (``Result.config["engine"] == "release"``): one pass per trial that clips, draws the noise, and applies the update.

The general engine computes a private step as a sequence of whole-array operations over
``(R, d)``: the clipped sum ``S`` (:meth:`dpsim.transforms.Batch.clipped_sum`), the noise ``z``
drawn as a fresh ``(R, d)`` array, ``g̃ = (z·σC + S)/b``, then each piece of the chain (moment
recursions, the learning rate) and ``w + u``, each a pass over ``(R, d)`` arrays of several MB
(workload W: R = 64, d = 10⁴).  At large ``d`` those passes, not arithmetic, cost what the
normals do not.  Here a *recognized* chain runs, per trial ``r``, as

    S_r    = Σ_{i∈B_r} clip(s_r ⊙ g_i(w_r), C_r)    (a GLM: the engine's CSR/dense kernel body,
                                                      into one row buffer of d numbers; any other
                                                      problem: its own clipped sum, computed first)
    for j:  z = next normal of the run's noise Generator
            g̃ = (z·std_r + S_rj) / b
            the pieces' rules on g̃ in chain order (momentum, RMSProp/AdaGrad/Yogi, Adam, the
            learning rate; DP²'s accumulator), each on its own state
            w_rj ← w_rj + u

so ``z``, ``g̃`` and the update never exist as ``(R, d)`` arrays, and the row buffer stays in
cache.

**Bit for bit the chain's result.**  The normals come from the run's own
``numpy.random.Generator`` through Numba's compiled ``Generator.standard_normal``, or, for a
float64 release of :data:`INLINE_NORMALS_MIN` normals or more, through :mod:`dpsim._bitgen`'s
inlined copy of NumPy's PCG64 and ziggurat on the Generator's state array (both: the same ziggurat
on the same bit generator, values and final state equal ``gen.standard_normal((R, d))``,
``tests/fast/test_w_fast.py``, ``tests/core/test_bitgen.py``), in the chain's C order (trial by trial, coordinate by coordinate; the
clipped sum draws no randomness, so computing it per trial does not move any draw).  Every
element goes through the chain's operations in the chain's order, each rounded once to the run's
dtype (Numba compiles without fast-math: no reassociation, no fused multiply-add); the
hyperparameters enter as the values the chain computes (``StepContext.hp``, then rounded to the
dtype exactly as NumPy rounds a scalar operand).  The GLM trial body is the engine's own
(:func:`dpsim.problems._glm_kernels._trial_row`), writing one row buffer instead of a row of an
``(R, d)`` output, and each piece's recursion is the piece's own rule
(:mod:`dpsim.transforms.elements`), the one its update evaluates on arrays.
``tests/fast/test_w_fast.py`` checks equality with ``assert_array_equal`` for every optimizer on this
path, several seeds, every sampler, float64 and float32.

**Which chains.**  A chain whose pieces compose (:func:`dpsim.fast.compose.composition`:
a Gaussian privatizer — i.i.d. or correlated noise — or ``mean_gradient``, possibly behind
scale-then-privatize, then pieces that carry an element: ``scale``, ``trace``,
``precondition(adagrad | rmsprop | yogi)``, ``scale_by_adam`` with its DP corrections) runs as
one kernel per structure (:func:`dpsim.fast.release_kernels._make_composed`), whoever built it.  Other
shapes are derived from the chain's pieces too (:func:`dpsim.fast.compose.spec`: each privatizer and
combinator exposes its parts, built by its constructor from its validated values), whoever built
the chain: DP²'s three arrangements and its non-private form (:class:`Delayed`, from
``alternate``/``alongside``, ``accumulate``, ``apply_delayed`` and the releases), a
scale-then-privatize that prepares its scale with a lookahead (:class:`Prepared`: AdaDPS) and
independent moment estimation (:class:`Ime`, from a privatizer's
:class:`~dpsim.transforms.elements.Moments`: one pass per trial, the first release's normals drawn
before it, since its two releases draw one after the other from the one stream) and PAGAN/PASAN
(:class:`Ellipsoid`, from the ellipsoid privatizer's :class:`~dpsim.transforms.elements.Projected`,
AdaGrad's max guard and the learning rate: the privatizer's own projected-sum kernel per trial;
PASAN's ``||ĝ||²`` is NumPy's pairwise row sum, :func:`~dpsim.fast.release_kernels._row_sum`).
:func:`~dpsim.fast.compose.spec_of` returns any of them;
:func:`why_not` says why a chain has neither, naming the piece.  The run must be on NumPy
(``backend="numpy"``, or ``"numpy:blocked"``: there the normals are the step's unit-noise array
drawn up front by the backend's thread pool, as the chain draws it, and the kernel reads it
instead of a Generator) and without a public split, except AdaDPS, which reads one.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from .. import _bitgen
from .._validate import is_zero
from ..privacy import _ellipsoid as _E
from ..problems import _glm_kernels as _K
from ..transforms.elements import Ellipsoid, Ime, Prepared, Release, table
from . import compose as _compose
from .compose import lr_factor as _factor
from .compose import spec_of  # noqa: F401 - re-exported (dpsim.fast.release.spec_of)
from .release_kernels import (H_1, H_2, H_3, H_4, H_5, H_6, H_9, H_B, H_NEGLR, H_STD, H_ZERO,
                              INLINE_NORMALS_MIN, NH, OP_ACC, OP_ACC_SGD, OP_DIV, SRC_CSR,
                              SRC_DENSE, SRC_TOTAL, _composed_apply, _ellipsoid_apply, _ime_fused,
                              _inverse_root_of, _normal_at, _release_apply,
                              _trial_source, _row)

__all__ = ["FusedStep", "plan", "why_not", "spec_of", "INLINE_NORMALS_MIN"]


def _own(a, dt, ctx):
    """``a`` itself when the engine donates it (``StepContext.donate_state``: it keeps only what a
    step returns, so the step may update the array in place) and it is a writeable C-contiguous
    NumPy array of ``dt``; else a private copy.  (No ``(R, d)`` copy of the state or of the
    parameters is made at the first step: peak memory stays that of the chain.)"""
    if (getattr(ctx, "donate_state", False) and isinstance(a, np.ndarray) and a.dtype == dt
            and a.flags.c_contiguous and a.flags.writeable):
        return a
    return np.array(a, dtype=dt, order="C", copy=True)


def _table(dt, R, entries):
    """The (NH, R or 1) hyperparameter table from ``{row: value}``."""
    rows = {k: _row(v, dt) for k, v in entries.items()}
    width = R if any(a.shape[0] > 1 for a in rows.values()) else 1
    H = np.zeros((NH, width), dtype=dt)
    for k, a in rows.items():
        H[k, :] = a
    return H


def why_not(tx, backend, *, public_idx=None) -> str | None:
    """Why the transform ``tx`` cannot take the fused release on ``backend``, in one sentence, or
    ``None`` when it can (what :func:`plan` and :func:`dpsim.explain` both read).

    ``tx`` takes it when its pieces compose (:func:`dpsim.fast.compose.composition`: a
    Gaussian privatizer — i.i.d. or correlated noise — or ``mean_gradient``, possibly behind
    scale-then-privatize, then pieces with elements) or when its pieces give another shape
    (:class:`Delayed`, :class:`Prepared`, :class:`Ime`, :class:`Ellipsoid`;
    :func:`dpsim.fast.compose.spec`).  ``public_idx``: the run's public
    split; only a :class:`Prepared` chain (which reads it) runs fused with one, and it always has
    one."""
    spec = _compose.spec(tx)
    if isinstance(spec, str):
        return spec
    if public_idx is not None and not isinstance(spec, Prepared):
        return ("the run has a public split, and only a scale_then_privatize with a lookahead "
                "(Prepared: AdaDPS's public preparation) reads one")
    if public_idx is None and isinstance(spec, Prepared):
        return ("its scale_then_privatize prepares its scale with a lookahead (Prepared), which "
                "the fused release runs on public data only, and the run has no public split")
    if _correlated(spec) and not isinstance(spec, (_compose.Composition, Ime)):
        return (f"its {type(spec).__name__} shape draws correlated noise, which the fused "
                "release takes only for composed chains and IME")
    if backend.name != "numpy":  # either noise layout (dpsim.backend.NOISE_LAYOUTS) is handled
        return f"backend {backend.name!r}: the fused release runs on NumPy only"
    return None


def plan(problem, tx, backend, *, public_idx=None):
    """A :class:`FusedStep` for the transform ``tx`` on ``problem`` (a backend view), or ``None``
    when :func:`why_not` gives a reason (pieces that give no shape, a public
    split it does not read, correlated noise it does not take, a backend other than NumPy)."""
    if why_not(tx, backend, public_idx=public_idx) is not None:
        return None
    return FusedStep(_compose.spec(tx), problem, tx, public_idx)


def _correlated(spec) -> bool:
    """Whether a release of ``spec`` draws correlated noise (:attr:`Release.source`)."""
    return any(isinstance(v, Release) and v.source is not None
               for v in (getattr(spec, f.name) for f in fields(spec)))


class FusedStep:
    """One engine step of a chain with a fast shape (:func:`plan`):
    ``step(...) -> (params, state)``, updating ``params`` and the state's arrays in place (the
    engine keeps only what ``step`` returns, as with ``StepContext.donate_state``)."""

    def __init__(self, spec, problem, tx=None, public_idx=None):
        from ..problems.glm import _GLMProblem, _LINKS  # noqa: PLC0415 - problems is below

        self.spec = spec
        self.problem = problem
        self.tx = tx
        self.public_idx = public_idx
        glm = (isinstance(problem, _GLMProblem) and problem.backend_name == "numpy"
               and type(problem).clipped_grad_sum is _GLMProblem.clipped_grad_sum
               and type(problem)._fast_clipped_grad_sum is _GLMProblem._fast_clipped_grad_sum)
        self.srck = SRC_TOTAL
        e1 = np.zeros(1)
        self.data, self.indices, self.indptr, self.rn2, self.X, self.y = (
            e1, np.zeros(1, dtype=np.int32), np.zeros(2, dtype=np.int32), e1, np.zeros((1, 1)), e1)
        self.kind, self.lam = 0, 0.0
        if glm:
            X = problem.X
            self.kind, self.lam = _LINKS.index(problem.link), float(problem.reg)
            self.rn2, self.y = problem._rn2, problem.y
            if problem.sparse:
                self.srck = SRC_CSR
                self.data, self.indices, self.indptr = X.data, X.indices, X.indptr
            else:
                self.srck = SRC_DENSE
                self.X = X
        self.W = None
        self.A = self.B = None
        self.buf = None
        self._z = None  # the row of normals drawn inline (_trial_source)
        self._static: dict = {}
        self._scale = None  # (v, s) of DP²'s delayed scale
        self._s = None  # scale-then-privatize's s, recomputed each step (_stp_scale)
        self._den = None  # (v, D) of DP²'s delayed denominator
        self._total = None  # PAGAN's projected sums (Ellipsoid)
        self._sq = None  # PASAN's row of squares
        self._ime_bufs = None  # IME's rows of g̃ and of squares
        self._z1 = None  # IME's first-release normals (R, d), when drawn before its pass
        self._slots: dict = {}  # (piece, field) -> the state array a composed step updates

    # -- pieces ---------------------------------------------------------------------------------
    def _adopt(self, params, ctx):
        """The parameter array to update in place: the one returned by the last step, or a new
        one (the first step; a projection's output) taken over (:func:`_own`)."""
        if params is not self.W:
            self.W = _own(params, params.dtype, ctx)
            self.buf = np.empty(self.W.shape[1], dtype=self.W.dtype)
        return self.W

    def _release(self, rel, W, idx, mask, ctx, S, H, op, B, D):
        """One release of ``rel`` on the batch (scaled by ``S`` unless ``None``) and DP²'s step
        ``op`` (one kernel call, :func:`_release_apply`)."""
        args, z = self._release_args(rel, W, idx, mask, ctx, S)
        _release_apply(*args, H, op, B if B is not None else self._dummy(W),
                       D if D is not None else self._dummy(W))
        self._store_draws(z, ctx)

    def _release_composed(self, key, rel, W, idx, mask, ctx, S, slots, K, U=None, z=None):
        """One release of ``rel`` on the batch (scaled by ``S`` unless ``None``; divided by ``U``
        unless ``None``), the elements of the structure ``key`` on ``slots`` with the constants
        ``K``, and the update, in one kernel call (:func:`_composed_apply`); ``z``: the step's unit
        noise drawn already (:meth:`_correlated_noise`), else drawn as :meth:`_noise` says."""
        H = self._static.get(("release", id(rel)))
        if H is None:
            H = self._static[("release", id(rel))] = _table(W.dtype, W.shape[0],
                                                        self._base(rel, None, ctx, W.dtype))
        args, z = self._release_args(rel, W, idx, mask, ctx, S, z)
        _composed_apply(key, *args, H, slots, K, U)
        self._store_draws(z, ctx)

    def _release_step(self, rel, lr, W, idx, mask, ctx, S):
        """A release of ``rel`` (of the batch scaled by ``S`` unless ``None``) taken as the step
        with the learning rate of the ``"scale"`` element ``lr``: the structure ``"scale"``, on
        the element's constants."""
        K = self._static.get(("scale", id(lr)))
        if K is None:
            K = self._static[("scale", id(lr))] = table(lr.consts(None, ctx), W.dtype)
        self._release_composed("scale", rel, W, idx, mask, ctx, S, (), K)

    @staticmethod
    def _store_draws(z, ctx):
        """After a kernel that drew its normals inline on the Generator's state array ``z``, move
        the Generator on to that state."""
        if isinstance(z, np.ndarray) and z.dtype == np.uint64:
            _bitgen.store_state(ctx.backend._gen, z)

    def _release_args(self, rel, W, idx, mask, ctx, S, z=None):
        """The leading arguments of :func:`_release_apply` (and :func:`_ime_fused`) for one release
        of ``rel`` on the batch, through ``recip``; and the release's noise source (``z``: a
        state array whose Generator the caller moves on after the kernel; given: drawn already)."""
        R = W.shape[0]
        dt = W.dtype
        if rel.clip is None:
            clip_arg = None
        else:
            clip_arg = rel.clip if isinstance(rel.clip, float) else ctx.hp_vec(rel.clip)
        total = self.buf.reshape(1, -1)  # unused unless srck == SRC_TOTAL
        want_scale = S is not None
        Sk = W if S is None else np.ascontiguousarray(S, dtype=dt)
        want_mask = mask is not None
        M = _K._NO_MASK if mask is None else np.ascontiguousarray(mask, dtype=np.bool_)
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if self.srck == SRC_TOTAL:
            from ..transforms.base import Batch  # noqa: PLC0415

            batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
            total = np.ascontiguousarray(batch.clipped_sum(clip_arg, scale=S), dtype=dt)
            C = np.zeros(1)
        else:
            from ..problems.glm import _clip_per_trial  # noqa: PLC0415

            C = np.ascontiguousarray(_clip_per_trial(clip_arg, R), dtype=np.float64)
        if z is None:
            z = self._noise(rel.noisy, W, ctx)
        return ((self.srck, self.data, self.indices, self.indptr, self.rn2, self.X, idx, W, self.y,
                 self.kind, self.lam, Sk, want_scale, C, M, want_mask, total, self.buf, z,
                 self._zbuf(z, W), rel.noisy, self._recip(ctx)), z)

    @staticmethod
    def _noise(noisy, W, ctx):
        """Where the release's normals come from: the run's Generator (stream layout: drawn in the
        kernel, in C order); on the blocked layout the step's ``(R, d)`` unit-noise array, drawn
        here exactly as the chain's :func:`dpsim.privacy.noise.add_noise` draws it (one
        ``backend.normal(shape)`` per noisy release, so the block streams advance as in the chain
        and the thread pool prepares the next step's noise while this step's clipped sums run);
        no draw (``W`` as a placeholder the kernel never reads) for a noiseless release.  On the
        stream layout a float64 release of at least :data:`INLINE_NORMALS_MIN` normals draws
        them with :mod:`dpsim._bitgen` on a copy of the Generator's PCG64 state, written back
        after the kernel (the same numbers and the same final state; reading and writing the
        state has a fixed cost, which the faster draws repay from a few thousand normals on)."""
        be = ctx.backend
        if be.noise_layout == "stream":
            gen = be._gen
            if (noisy and W.dtype == np.float64 and W.size >= INLINE_NORMALS_MIN
                    and _bitgen.supports(gen)):
                return _bitgen.state_of(gen)  # drawn inline, stored back after the kernel
            return gen
        if not noisy:
            return W
        z = be.normal(W.shape)
        if not (isinstance(z, np.ndarray) and z.dtype == W.dtype and z.flags.c_contiguous):
            z = np.ascontiguousarray(z, dtype=W.dtype)  # pragma: no cover - the backend's own dtype
        return z

    def _zbuf(self, z, W):
        """The row buffer of the inlined draws (a state array ``z``); else a placeholder."""
        if not (isinstance(z, np.ndarray) and z.dtype == np.uint64):
            return self.buf
        if self._z is None or self._z.shape[0] != W.shape[1]:
            self._z = np.empty(W.shape[1], dtype=np.float64)
        return self._z

    @staticmethod
    def _dummy(W):
        return np.zeros((1, 1), dtype=W.dtype)

    def _base(self, rel, lr, ctx, dt):
        """The table entries every release has: noise std, b, the learning-rate factor of the
        ``"scale"`` element ``lr`` (none for ``None``), zero."""
        std = 0.0 if not rel.noisy else ctx.hp(rel.std)
        b = float(ctx.batch_size)
        ent = {H_STD: std, H_B: 1.0 / b if self._recip(ctx) else b, H_ZERO: 0.0}
        if lr is not None:
            ent[H_NEGLR] = _factor(lr, ctx)
        return ent

    @staticmethod
    def _recip(ctx):
        """``b`` a power of two: the kernel multiplies by the exact ``1/b`` (:func:`_noisy_mean`)."""
        b = int(ctx.batch_size)
        return 0 < b < 2 ** 60 and b & (b - 1) == 0

    def _static_table(self, key, rel, lr, ctx, dt, R, extra=None):
        H = self._static.get(key)
        if H is None:
            ent = self._base(rel, lr, ctx, dt)
            ent.update(extra or {})
            H = self._static[key] = _table(dt, R, ent)
        return H

    # -- one step -------------------------------------------------------------------------------
    def step(self, params, idx, mask, state, ctx):
        W = self._adopt(params, ctx)
        if isinstance(self.spec, _compose.Composition):
            return W, self._composed(W, idx, mask, state, ctx)
        if isinstance(self.spec, Prepared):
            return self._prepared(W, idx, mask, state, ctx)
        if isinstance(self.spec, Ellipsoid):
            return self._ellipsoid(W, idx, mask, state, ctx)
        if isinstance(self.spec, Ime):
            return self._ime(W, idx, mask, state, ctx)
        return W, self._delayed(W, idx, mask, state, ctx)

    def _prepared(self, W, idx, mask, state, ctx):
        """The chain's first part (:attr:`Prepared.prepare`), then the scaled release and the
        learning rate in one kernel call; a step without a fast first part runs the chain."""
        from ..transforms.base import Batch  # noqa: PLC0415

        sp = self.spec
        batch = Batch(self.problem, W, idx, mask, ctx.batch_size, self.public_idx)
        out = sp.prepare(batch, state, W, ctx)
        if out is None:
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        state, s = out
        self._release_step(sp.release, sp.lr, W, idx, mask, ctx, s)
        return W, state

    def _ellipsoid(self, W, idx, mask, state, ctx):
        """PAGAN's or PASAN's step (:class:`Ellipsoid`): the privatizer's preparation, then
        projected sums, noise, AdaGrad with the max guard (per coordinate, or per trial on
        ``||ĝ||²``), the learning rate and the update in one kernel call;
        a step without a GLM form (or not float64) runs the chain."""
        from ..transforms.base import Batch  # noqa: PLC0415
        from ..transforms.preconditioners import PreconditionState  # noqa: PLC0415

        sp = self.spec
        pname, qname = sp.names
        batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
        out = sp.glm_release(batch, state[pname], W, ctx) if W.dtype == np.float64 else None
        if out is None:
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        pst, rows, kb, std = out
        state = dict(state)
        v = state[qname].v
        if self.A is None or v is not self.A:
            self.A = _own(v, W.dtype, ctx)
        noisy = std is not None
        STD = np.ascontiguousarray(std, dtype=np.float64) if noisy else self._dummy(W)
        H = self._static.get("ellipsoid")
        if H is None:
            b = float(ctx.batch_size)
            H = self._static["ellipsoid"] = _table(W.dtype, W.shape[0], {
                H_B: 1.0 / b if self._recip(ctx) else b, H_NEGLR: _factor(sp.lr, ctx),
                H_3: _compose.guard(sp, ctx)})
        R, d = W.shape
        if self._total is None or self._total.shape != (R, d):
            self._total = np.empty((R, d))
        lam = np.empty(kb[0].shape)
        z = self._noise(noisy, W, ctx)
        if self._sq is None or self._sq.shape[0] != d:
            self._sq = np.empty(d)
        _ellipsoid_apply(*rows, W, *kb, self._total, lam, z, self._zbuf(z, W), noisy, STD,
                         self._recip(ctx), H, self.A, sp.per_norm, self._sq)
        self._store_draws(z, ctx)
        M = None if kb[2] is False else kb[1]
        state[pname] = pst._replace(projected=_E.projected_fraction(lam, M), noise=None)
        state[qname] = PreconditionState(v=self.A)
        return W, state

    def _ime(self, W, idx, mask, state, ctx):
        """IME's step (:class:`Ime`) in one kernel call, trial by trial (:func:`_ime_fused`): the
        first release, the second, the moment recursion and the update; the noise of each
        release drawn as the chain draws it — all of the first release's normals (an ``(R, d)``
        array drawn before the kernel, on the stream layout from the run's Generator in C order)
        before the second's, unless the second draws nothing (``σ2 = 0``: the noiseless oracles,
        or a zero noise multiplier), when the first release draws inside the kernel.  Not
        float64: the chain runs."""
        from ..transforms.base import Batch  # noqa: PLC0415
        from ..transforms.preconditioners import AdamState, PreconditionState  # noqa: PLC0415

        sp = self.spec
        if W.dtype != np.float64:
            batch = Batch(self.problem, W, idx, mask, ctx.batch_size)
            updates, state = self.tx.update(batch, state, W, ctx)
            return W + updates, state
        R, d = W.shape
        if self._ime_bufs is None or self._ime_bufs[0].shape[0] != d:
            self._ime_bufs = (np.empty(d), np.empty(d))  # g̃'s row, a row of squares
        g1, sqb = self._ime_bufs
        pname, qname = sp.names
        noisy2 = not is_zero(sp.s2)  # 0 for the noiseless oracles: the second release draws nothing
        H1 = self._static_table("ime1", sp.release, None, ctx, W.dtype, R)
        # scale-then-privatize: s from the rule's v before this step (None for a plain chain)
        s = None if sp.stp_eps is None else self._stp_scale(state[qname].v, ctx, W.dtype)
        state = dict(state)
        z1 = z2 = None  # the first release draws inside the kernel, unless:
        if sp.release.source is not None:  # correlated noise: both releases' arrays, in order
            z1, z2 = self._correlated_pair(sp.release, noisy2, W, state, ctx, pname)
        elif noisy2 and sp.release.noisy:  # every first-release normal before the second's
            be = ctx.backend
            if be.noise_layout == "stream":
                if self._z1 is None or self._z1.shape != (R, d):
                    self._z1 = np.empty((R, d))
                z1 = self._z1
                _bitgen.fill_normals(be._gen, z1)  # gen.standard_normal(out=z1)'s numbers
            else:
                z1 = self._noise(True, W, ctx)  # the blocked layout's array, as the chain's
        args, z = self._release_args(sp.release, W, idx, mask, ctx, s, z=z1)
        # the second release's constants, with the privatizer's expressions
        b = float(ctx.batch_size)
        c = ctx.hp(sp.clip)
        project = ctx.sampling != "fixed" and not sp.noiseless
        if project:
            sens2 = c ** 2 * (2.0 / b)
        else:
            sens2 = c ** 2 * (2.0 * b - 1.0) / (b * b)
        K = _row(ctx.hp(sp.s2) * sens2 if noisy2 else 0.0, np.float64)
        Cc = _row(c, np.float64)
        st = state[qname]
        ent = {H_B: 1.0 / b if self._recip(ctx) else b, H_NEGLR: _factor(sp.lr, ctx), H_ZERO: 0.0}
        adam = sp.rule == "adam"
        add_eps = True
        if adam:
            if self.A is None or st.m is not self.A or st.v is not self.B:
                self.A = _own(st.m, W.dtype, ctx)
                self.B = _own(st.v, W.dtype, ctx)
            # the piece's constants (β1, 1−β1, β2, 1−β2, 1−β1ᵗ, 1−β2ᵗ, Φ, floor, ε) at t = count + 1
            k = sp.pre.consts(st, ctx)
            t = st.count + 1
            add_eps = sp.pre.key.endswith(":eps")
            ent.update({H_1: k[0], H_2: k[1], H_3: k[2], H_4: k[3], H_5: k[4], H_6: k[5],
                        H_9: k[8]})
            H = _table(W.dtype, R, ent)
        else:
            if self.A is None or st.v is not self.A:
                self.A = _own(st.v, W.dtype, ctx)
            H = self._static.get("ime2")
            if H is None:
                ent[H_3] = sp.pre.consts(st, ctx)[0]  # AdaGrad's ε
                H = self._static["ime2"] = _table(W.dtype, R, ent)
        if z2 is None:
            z2 = self._noise(noisy2, W, ctx)  # after the first release's draws
        _ime_fused(*args, H1, g1, self.A, self.B if adam else self._dummy(W), z2, self._zbuf(z2, W),
                   noisy2, project, Cc, K, H, sqb, adam, add_eps, s)
        for zz in (z, z2):  # the inlined draws: move the Generator on
            self._store_draws(zz, ctx)
        if adam:
            state[qname] = AdamState(m=self.A, v=self.B, count=t)
        else:
            state[qname] = PreconditionState(v=self.A)
        return W, state

    @staticmethod
    def _draw_correlated(rel, state, field, W, ctx, piece="privatizer"):
        """One release's unit noise ``(R, d)`` drawn through its noise source
        (:attr:`Release.source`) on the privatizer's stream state ``state[piece].<field>``,
        which ``state`` (the step's copy) then holds moved on: the draw of
        :func:`dpsim.privacy.noise.add_noise` in the privatizer, so the same array and the same
        stream state as the chain."""
        pst = state[piece]
        u, ns = rel.source.draw(getattr(pst, field), ctx, W.shape)
        state[piece] = pst._replace(**{field: ns})
        if not (isinstance(u, np.ndarray) and u.dtype == W.dtype and u.flags.c_contiguous):
            u = np.ascontiguousarray(u, dtype=W.dtype)  # pragma: no cover - the backend's own dtype
        return u

    def _correlated_noise(self, rel, W, state, ctx, piece):
        """A composed step's unit noise of a correlated release (:meth:`_draw_correlated`, on the
        state of the privatizer ``piece``); ``None`` for i.i.d. noise (drawn by the kernel or
        :meth:`_noise`) or a noiseless release (the privatizer draws nothing then either)."""
        if rel.source is None or not rel.noisy:
            return None
        return self._draw_correlated(rel, state, "noise", W, ctx, piece)

    def _correlated_pair(self, rel, noisy2, W, state, ctx, piece):
        """An :class:`Ime` step's two unit-noise arrays of a correlated release, drawn as its
        privatizer (the state's ``piece``) draws them (:meth:`_draw_correlated`): the first
        release's on ``noise1`` (a noiseless oracle's on ``noise``), then, unless the second
        release draws nothing, the second's on ``noise2``; ``None`` for a release that draws
        nothing."""
        first = "noise1" if hasattr(state[piece], "noise1") else "noise"
        z1 = self._draw_correlated(rel, state, first, W, ctx, piece) if rel.noisy else None
        z2 = self._draw_correlated(rel, state, "noise2", W, ctx, piece) if noisy2 else None
        return z1, z2

    def _composed(self, W, idx, mask, state, ctx):
        """A composed chain's step (:class:`~dpsim.fast.compose.Composition`): its release
        (the correlated noise drawn first, on the privatizer's stream state, as the privatizer
        draws it; under scale-then-privatize ``s`` from the piece's ``v`` before the step), every
        element and the update in one kernel call, on the pieces' state arrays in place; each
        piece's state then advanced by its element (e.g. Adam's count)."""
        comp = self.spec
        dt = W.dtype
        state = dict(state)
        z = self._correlated_noise(comp.release, W, state, ctx, comp.release_piece)
        slots = []
        for name, el in comp.pieces:
            st = state[name]
            for field in el.slots:
                a = getattr(st, field)
                own = self._slots.get((name, field))
                if own is None or a is not own:
                    own = _own(a, dt, ctx)
                    if any(own is b for b in slots):  # one array in two slots: keep them apart
                        own = np.array(a, dtype=dt, order="C", copy=True)
                    self._slots[(name, field)] = own
                slots.append(own)
        s = None
        if comp.stp_eps is not None:  # from v before this step's update
            s = self._stp_scale(self._slots[(comp.stp_piece, "v")], ctx, dt)
        K = self._static.get("consts")
        if K is None:
            consts = []
            for name, el in comp.pieces:
                consts.extend(el.consts(state[name], ctx))
            K = table(consts, dt)
            if not any(el.varying for _, el in comp.pieces):
                self._static["consts"] = K
        slots = tuple(slots)
        self._release_composed(comp.key, comp.release, W, idx, mask, ctx, s, slots, K, U=s, z=z)
        i = 0
        for name, el in comp.pieces:
            n = len(el.slots)
            state[name] = el.advance(state[name], slots[i:i + n])
            i += n
        return state

    def _stp_scale(self, v, ctx, dt):
        """Scale-then-privatize's ``s = 1/(√max(v, 0) + ε_s)``, the expression of
        :func:`dpsim.transforms.combinators.scale_then_privatize` (``ε_s`` the spec's
        ``stp_eps``), or ``None`` for a plain post-processing chain.  Float64: one pass of :func:`_inverse_root` into a buffer kept
        across steps (recomputed each step before the kernel updates ``v`` in place; the four
        NumPy passes and their ``(R, d)`` temporaries are the cost at large R·d); otherwise the
        NumPy expression."""
        if self.spec.stp_eps is None:
            return None
        if self._s is None or self._s.shape != v.shape:
            self._s = np.empty(v.shape)
        return _inverse_root_of(v, ctx.hp(self.spec.stp_eps), dt, self._s)

    def _delayed(self, W, idx, mask, state, ctx):
        from ..transforms.preconditioners import DelayedState  # noqa: PLC0415

        sp = self.spec
        dt, R = W.dtype, W.shape[0]
        state = dict(state)
        q = state[sp.piece]
        if self.B is None or q.G is not self.B:  # G is updated in place: own it
            self.B = _own(q.G, dt, ctx)
            q = state[sp.piece] = DelayedState(q.v, self.B)
        if sp.order == "extra_query":
            p = (ctx.t - 1) % sp.s1
            if p == 0:  # release 1 into G, refresh, step with it (η1)
                H = self._static_table("sgd", sp.rel1, sp.lr, ctx, dt, R)
                self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC_SGD, self.B, None)
                q = sp.refresh(DelayedState(q.v, self.B), ctx)
                self.B = _own(q.G, dt, ctx)
                state[sp.piece] = DelayedState(q.v, self.B)
                return state
            # side release 1 into G (no step), then the preconditioned release 2 (η2)
            H = self._static_table("side", sp.rel1, sp.lr, ctx, dt, R)
            self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC, self.B, None)
            self._release_step(sp.rel2, sp.lr2, W, idx, mask, ctx, self._delayed_scale(q.v, ctx))
            return state
        p = (ctx.t - 1) % (sp.s1 + sp.s2)
        if p < sp.s1:  # SGD phase: G ← G + g̃, w ← w − η1 g̃
            H = self._static_table("sgd", sp.rel1, sp.lr, ctx, dt, R)
            self._release(sp.rel1, W, idx, mask, ctx, None, H, OP_ACC_SGD, self.B, None)
            return state
        if p == sp.s1:  # the switch: refresh v from G, G ← 0 (the chain's on_switch)
            q = sp.refresh(q, ctx)
            self.B = _own(q.G, dt, ctx)
            q = state[sp.piece] = DelayedState(q.v, self.B)
        if sp.order == "noise_first":  # release, then divide by D(v)
            H = self._static_table("adaptive", sp.rel2, sp.lr2, ctx, dt, R)
            self._release(sp.rel2, W, idx, mask, ctx, None, H, OP_DIV, None,
                          self._delayed_den(q.v, ctx))
        else:  # release of the batch scaled by 1/D(v)
            self._release_step(sp.rel2, sp.lr2, W, idx, mask, ctx, self._delayed_scale(q.v, ctx))
        return state

    def _delayed_scale(self, v, ctx):
        """``s = 1/(√max(v, 0) + ε)``, the expression of :func:`dpsim.optimizers.dp2._delayed_scale_release`
        (and of ``scale_then_privatize``), recomputed whenever ``v`` is another array (a refresh)."""
        if self._scale is None or self._scale[0] is not v:
            self._scale = (v, _inverse_root_of(v, ctx.hp(self.spec.eps), v.dtype, np.empty(v.shape)))
        return self._scale[1]

    def _delayed_den(self, v, ctx):
        """``D(v)`` of :func:`dpsim.transforms.preconditioners.apply_delayed`, per refresh."""
        if self._den is None or self._den[0] is not v:
            self._den = (v, np.ascontiguousarray(self.spec.P.denominator(v, ctx)))
        return self._den[1]
