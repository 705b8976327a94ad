"""Exact optima of the problems whose minimizer has no closed form (private to :mod:`dpsim.problems`):
Newton's method for logistic regression, the LP dual for least absolute deviations."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .base import _stable_sigmoid


def _pcg(matvec, rhs, precond_diag, rtol, maxiter):
    """Preconditioned conjugate gradients for an SPD operator (Jacobi preconditioner)."""
    x = np.zeros_like(rhs)
    r = rhs.copy()
    z = r / precond_diag
    p = z.copy()
    rz = r @ z
    stop = rtol * np.linalg.norm(rhs)
    for _ in range(maxiter):
        if np.linalg.norm(r) <= stop:
            break
        Ap = matvec(p)
        alpha = rz / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        z = r / precond_diag
        rz_new = r @ z
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x


def _logistic_newton(X, y, reg, *, tol=1e-10, max_iter=100):
    """Minimize ``mean(log(1+exp(-y Xw))) + reg/2 ||w||^2`` by (truncated) Newton.

    Small ``d``: exact Newton steps with a dense Hessian.  Large ``d``: Newton-CG with Hessian-
    vector products ``X^T (D (X v)) / n + reg v`` and a Jacobi preconditioner.  Armijo
    backtracking far from the optimum; full steps once ``||grad|| < 1e-6``.  Iterates until
    ``||grad F|| < tol``.
    """
    n, d = X.shape
    sparse = sp.issparse(X)
    w = np.zeros(d)

    def fg(w):
        m = X @ w
        t = -y * m
        f = np.mean(np.logaddexp(0.0, t)) + 0.5 * reg * (w @ w)
        g = X.T @ (-y * _stable_sigmoid(np, t)) / n + reg * w
        return f, g, m

    f, g, m = fg(w)
    X2 = X.multiply(X).tocsr() if sparse else None
    for _ in range(max_iter):
        gn = np.linalg.norm(g)
        if gn < tol:
            return w
        e = np.exp(-np.abs(m))
        D = e / (1.0 + e) ** 2  # sigmoid(m) sigmoid(-m)
        if d <= 1500:
            XD = X.T @ sp.diags(D) if sparse else X.T * D
            H = np.asarray(XD @ X if not sparse else (XD @ X).toarray()) / n + reg * np.eye(d)
            p = -np.linalg.solve(H, g)
        else:
            def hv(v, D=D):
                return X.T @ (D * (X @ v)) / n + reg * v

            diag = (X2.T @ D if sparse else (X * X).T @ D) / n + reg
            p = -_pcg(hv, g, diag, rtol=min(0.1, math.sqrt(gn)), maxiter=2000)
        slope = g @ p
        if slope >= 0:  # not a descent direction (CG breakdown): fall back to steepest descent
            p = -g
            slope = -(g @ g)
        if gn < 1e-6:
            w_new = w + p
            f_new, g_new, m_new = fg(w_new)
            if np.linalg.norm(g_new) >= gn:
                break
        else:
            t = 1.0
            while True:
                w_new = w + t * p
                f_new, g_new, m_new = fg(w_new)
                if f_new <= f + 1e-4 * t * slope or t < 1e-10:
                    break
                t *= 0.5
        w, f, g, m = w_new, f_new, g_new, m_new
    gn = np.linalg.norm(g)
    if gn < max(tol, 1e-8):
        return w
    raise RuntimeError(
        f"Newton's method for the logistic optimum stopped at ||grad F|| = {gn:.3g} > {tol:g}; "
        "the data may be separable (use reg > 0)"
    )


def _lad_optimum(A, b, radius):
    """Exact minimizer of ``F(x) = (1/n) sum_i |a_i . x - b_i|`` (over ``[-radius, radius]^d``).

    Solved through the LP dual, which has ``n + d`` variables and only ``2d`` (box) or ``d``
    (no domain) constraints and so is much faster for ``n >> d`` than the primal LP:

        max_{|y_i| <= 1/n}  -b . y - radius ||A^T y||_1        (box)
        max_{|y_i| <= 1/n, A^T y = 0}  -b . y                  (no domain)

    (weak duality: ``F(x) >= sum_i y_i (a_i . x - b_i) >= -b . y - radius ||A^T y||_1`` for
    feasible ``y``).  The primal ``x*`` is read from the constraint multipliers (HiGHS), then
    polished to the exact LP vertex: coordinates at the box boundary are fixed and the remaining
    ones solve the square system of the examples with the smallest residuals.  The duality gap
    is checked; if the polish cannot close it, the primal LP is solved directly.
    Returns ``(x*, F(x*))``.
    """
    from scipy.optimize import linprog  # noqa: PLC0415

    n, d = A.shape

    def F(x):
        return float(np.mean(np.abs(A @ x - b)))

    At = sp.csr_matrix(A.T)
    if radius is not None:
        Id = sp.identity(d, format="csr")
        A_ub = sp.vstack([sp.hstack([At, -Id]), sp.hstack([-At, -Id])], format="csr")
        res = linprog(np.concatenate([b, np.full(d, float(radius))]), A_ub=A_ub, b_ub=np.zeros(2 * d),
                      bounds=[(-1.0 / n, 1.0 / n)] * n + [(0, None)] * d, method="highs")
        mu = res.ineqlin.marginals if res.status == 0 else None
        cands = [] if mu is None else [mu[:d] - mu[d:], mu[d:] - mu[:d]]
        cands = [np.clip(c, -radius, radius) for c in cands]
    else:
        res = linprog(b, A_eq=At, b_eq=np.zeros(d), bounds=[(-1.0 / n, 1.0 / n)] * n, method="highs")
        cands = [] if res.status != 0 else [res.eqlin.marginals, -res.eqlin.marginals]
    dual = -res.fun if res.status == 0 else -np.inf
    best = min(cands, key=F) if cands else None

    if best is not None:  # polish to the exact vertex
        x = best.copy()
        bound = np.zeros(d, dtype=bool) if radius is None else np.abs(x) >= radius * (1 - 1e-9)
        if radius is not None:
            x[bound] = np.sign(x[bound]) * radius
        free = np.flatnonzero(~bound)
        if free.size:
            r = A @ x - b
            Z = np.argsort(np.abs(r), kind="stable")[: free.size]
            rhs = b[Z] - A[np.ix_(Z, np.flatnonzero(bound))] @ x[bound]
            try:
                x_free = np.linalg.solve(A[np.ix_(Z, free)], rhs)
                x_new = x.copy()
                x_new[free] = x_free
                if radius is not None:
                    x_new = np.clip(x_new, -radius, radius)
                if F(x_new) <= F(x):
                    x = x_new
            except np.linalg.LinAlgError:
                pass
        if F(x) - dual <= 1e-12 * max(1.0, abs(dual)) or F(x) <= F(best):
            best = x
    if best is None or F(best) - dual > 1e-9 * max(1.0, abs(dual)):  # pragma: no cover - fallback
        I = sp.identity(n, format="csr")
        A_eq = sp.hstack([sp.csr_matrix(A), -I, I], format="csr")
        c = np.concatenate([np.zeros(d), np.full(2 * n, 1.0 / n)])
        xb = (-radius, radius) if radius is not None else (None, None)
        res = linprog(c, A_eq=A_eq, b_eq=b, bounds=[xb] * d + [(0, None)] * (2 * n), method="highs")
        if res.status != 0:
            raise RuntimeError(f"linprog failed for the absolute-regression optimum: {res.message}")
        best = res.x[:d].copy()
        if radius is not None:
            best = np.clip(best, -radius, radius)
    return best, F(best)


def _logistic_1d_newton(x, y):
    """Minimizer of ``F(w) = (1/n) sum_i log(1 + exp(-y_i x_i w))`` over ``w in R`` (``n = len(x)``).

    Only examples with ``x_i != 0`` move ``F``.  ``F'`` is increasing: the root is bracketed by
    doubling ``[-1, 1]``, then found by Newton steps that fall back to bisection whenever they
    leave the bracket, until ``|F'(w)| < 1e-15`` or the iterate stops moving.  The caller
    guarantees a finite minimizer (the nonzero ``y_i x_i`` take both signs).
    """
    n = x.shape[0]
    nz = x != 0
    z = y[nz] * x[nz]  # f_i(w) = log(1 + exp(-z_i w)) on the nonzero examples

    def d1(w):
        return -np.sum(z * _stable_sigmoid(np, -z * w)) / n

    def d2(w):
        e = np.exp(-np.abs(z * w))
        return np.sum(z * z * e / (1.0 + e) ** 2) / n

    lo, hi = -1.0, 1.0
    while d1(lo) > 0:
        lo *= 2.0
    while d1(hi) < 0:
        hi *= 2.0
    w = 0.0
    for _ in range(200):
        g = d1(w)
        if abs(g) < 1e-15:
            break
        if g > 0:
            hi = w
        else:
            lo = w
        w_new = w - g / d2(w)
        if not lo < w_new < hi:
            w_new = 0.5 * (lo + hi)
        if w_new == w:
            break
        w = w_new
    return w


def _ridge_optimum(X, y, reg, *, tol=1e-9):
    """Minimizer of ``F(w) = (1/2n) ||X w - y||^2 + (reg/2) ||w||^2`` (dense or CSR ``X``).

    Dense: least squares on the stacked system ``[X; sqrt(n reg) I] w = [y; 0]`` (LAPACK, no
    squared condition number; minimum-norm when ``reg = 0`` and ``n < d``).  Sparse with
    ``reg > 0``: the normal equations ``(X^T X + n reg I) w = X^T y`` by a sparse direct solve
    (SuperLU); sparse with ``reg = 0``: LSQR to machine tolerance.  The result is checked:
    ``||grad F(w)||`` must be below ``tol`` times the scale ``||X^T y|| / n`` (else
    ``RuntimeError``: the system is too ill-conditioned for an exact optimum; use ``reg > 0``).
    """
    n, d = X.shape
    if sp.issparse(X):
        from scipy.sparse.linalg import lsqr, spsolve  # noqa: PLC0415

        if reg > 0:
            A = (X.T @ X + (n * reg) * sp.identity(d, format="csr")).tocsc()
            w = np.asarray(spsolve(A, X.T @ y)).reshape(d)
        else:
            w = lsqr(X, y, atol=1e-15, btol=1e-15, conlim=1e12, iter_lim=50 * d)[0]
    else:
        if reg > 0:
            A = np.vstack([X, np.sqrt(n * reg) * np.eye(d)])
            w, *_ = np.linalg.lstsq(A, np.concatenate([y, np.zeros(d)]), rcond=None)
        else:
            w, *_ = np.linalg.lstsq(X, y, rcond=None)
    g = X.T @ (X @ w - y) / n + reg * w
    scale = max(np.linalg.norm(X.T @ y) / n, 1e-300)
    if not np.all(np.isfinite(w)) or np.linalg.norm(g) > tol * scale:
        raise RuntimeError(f"the least-squares optimum could not be solved exactly "
                           f"(||grad F|| = {np.linalg.norm(g):.3g} at scale {scale:.3g}); "
                           "the data are ill-conditioned: use reg > 0")
    return w
