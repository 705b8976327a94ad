"""Optimization problems for dpsim: empirical risks ``F(w) = (1/n) sum_i f(x_i; w)``.

Contract
--------
Every factory returns a :class:`Problem` that the simulation engine drives through exactly these
members (``R`` trials, ``b`` examples per batch, ``d`` parameters):

``name, n, d, config, has_domain``
    identity; ``config`` is a JSON-serializable dict whose ``"name"`` is the factory name and
    whose other keys are the factory's arguments (``get(**config)`` rebuilds it)
``optimum``
    ``(w_star (d,), F(w_star))`` as host NumPy float64, or ``None``; computed lazily on first
    access and cached
``on(backend)``
    the same problem with its data on ``backend.xp`` in ``backend.dtype`` (cached per backend
    name and dtype)
``loss(w) -> (R,)``
    full objective ``F`` over all ``n`` examples
``grad(w) -> (R, d)``
    ``grad F``
``per_example_grads(w, idx) -> (R, b, d)``
    ``grad f(x_{idx[r,i]}; w_r)``; ``idx`` an int64 array
``project(w) -> (R, d)``
    Euclidean projection onto the domain (identity if none)
``clipped_grad_sum(w, idx, clip, *, mask=None, scale=None)``
    ``(S, norms)``: ``S_r = sum_{i: mask[r,i]} clip(s_r * g_{r,i}, C_r)`` and
    ``norms[r,i] = ||s_r * g_{r,i}||_2`` (0 where masked out)

Capabilities
------------
Read-only attributes that optimizers and analyses use instead of the implementation classes;
they are the same on a problem and on each of its backend views ``problem.on(backend)``:

=====================  ===============================================================================
``domain``             :class:`Box` ``(radius)`` (``|w_j| <= radius``), :class:`Ball` ``(radius)``
                       (``||w||_2 <= radius``) or ``None``; ``project`` is its Euclidean projection
                       and ``has_domain`` is ``domain is not None``
``link``               for a GLM ``f_i(w) = l(x_i . w, y_i) + (reg/2)||w||^2``: ``"squared"``,
                       ``"logistic"``, ``"absolute"`` or ``"linear"``; ``None`` for other problems
``reg``                the l2 regularization coefficient (float, ``0.0`` when there is none)
``features``           a GLM's host feature matrix ``X`` (NumPy ``(n, d)`` or ``scipy.sparse`` CSR),
                       else ``None``
``scales``             host ``(d,)`` float64 coordinate scales ``sigma_j`` of the data
                       (``absolute_regression``, ``linear_box``), else ``None``
``lipschitz_rows()``   host ``(n, d)`` ``V`` with ``|grad f_i(w)_j| <= |V_ij|`` for all ``w``
                       (unregularized GLMs with ``|l'| <= 1``: ``V = features``), else ``None``
=====================  ===============================================================================

=========================  ================  ==========  =========  ==================  ==========
factory                    domain            link        reg        features            scales
=========================  ================  ==========  =========  ==================  ==========
``least_squares``          ``None``          squared     0.0        dense               ``None``
``logistic_regression``    ``None``          logistic    ``reg``    dense or CSR        ``None``
``absolute_regression``    Box(1.0) or None  absolute    0.0        dense               ``sigma``
``linear_box``             ``Box(1.0)``      linear      0.0        dense               ``sigma``
``sparse_logistic_1d``     ``None``          logistic    0.0        dense ``(n, 1)``    ``None``
``random_quadratic``       ``None``          ``None``    ``reg``    ``None``            ``None``
``quadratic_2d``           ``None``          ``None``    0.0        ``None``            ``None``
=========================  ================  ==========  =========  ==================  ==========

``clip(g, C) = g * min(1, C / ||g||_2)``; ``C`` is a Python float, ``math.inf``, ``None`` (no
clipping) or an ``(R,)`` backend array; a zero gradient stays zero.  With ``C`` ``None`` or
``inf`` the clip factor is exactly ``1.0``, so those two calls are bit-identical (the engine relies
on ``dp_sgd(noise=0, clip=inf)`` reproducing ``sgd``).  ``scale`` is ``None`` or an ``(R, d)``
array ``s`` (scale-then-privatize / preconditioned clipping).  ``mask`` is ``None`` or an ``(R, b)``
boolean array; masked entries (Poisson padding) hold a valid dummy index and contribute nothing.

The base class implements everything with array-API calls only (it runs under
``array_api_strict``); the default ``clipped_grad_sum`` materializes ``per_example_grads``.
Generalized linear models (``least_squares``, ``logistic_regression``, ``absolute_regression``,
``sparse_logistic_1d`` and the linear ``linear_box``) have ``g_i = c_i x_i + lam w`` with
``c_i = l'(x_i . w, y_i)``; on the NumPy backend their ``clipped_grad_sum`` works from the margins
``x_i . w_r`` with the Numba kernels of :mod:`dpsim.problems._glm_kernels` and never forms ``(R, b, d)``:
``||s*(c x + lam w)||^2 = c^2 ||s*x||^2 + 2 c lam x.(s^2*w) + lam^2 ||s*w||^2`` and the clipped
sum is ``s * (sum_i f_i c_i x_i + lam w sum_i f_i)`` with ``f_i`` the clip factors.  Sparse
features (``scipy.sparse.csr_matrix``) stay sparse end to end.

All factories are deterministic in ``seed`` (``numpy.random.default_rng(seed)``) and raise
``ValueError`` naming the offending value.

Examples
--------
>>> import dpsim
>>> dpsim.problems.names()
['least_squares', 'logistic_regression', 'absolute_regression', 'random_quadratic',
 'sparse_logistic_1d', 'quadratic_2d', 'linear_box']
>>> prob = dpsim.problems.get(name="least_squares", n=100, d=4)
>>> prob.n, prob.d, prob.link, prob.domain
(100, 4, 'squared', None)
"""

from __future__ import annotations

from .base import Ball, Box, Problem
from .glm import absolute_regression, least_squares, linear_box, logistic_regression, sparse_logistic_1d
from .quadratic import quadratic_2d, random_quadratic
from .data import from_data

__all__ = [
    "Problem",
    "Box",
    "Ball",
    "least_squares",
    "logistic_regression",
    "absolute_regression",
    "random_quadratic",
    "sparse_logistic_1d",
    "quadratic_2d",
    "linear_box",
    "from_data",
    "FACTORIES",
    "names",
    "get",
]


# =============================================================================================
# registry
# =============================================================================================

FACTORIES = {
    "least_squares": least_squares,
    "logistic_regression": logistic_regression,
    "absolute_regression": absolute_regression,
    "random_quadratic": random_quadratic,
    "sparse_logistic_1d": sparse_logistic_1d,
    "quadratic_2d": quadratic_2d,
    "linear_box": linear_box,
}


def names() -> list[str]:
    """Names of all problem factories.

    Returns
    -------
    list of str
        The factory names, in registration order (the keys of ``FACTORIES``).
    """
    return list(FACTORIES)


def get(name: str, **kwargs) -> Problem:
    """Build a problem by factory name; ``get(**problem.config)`` rebuilds ``problem``.

    Parameters
    ----------
    name : str
        A factory name (:func:`names`).
    **kwargs
        The factory's arguments.

    Returns
    -------
    Problem
        The problem the factory builds.

    Raises
    ------
    ValueError
        For an unknown name, or ``"from_data"`` (its data are not in its config).
    """
    if name == "from_data":
        raise ValueError("a problem built by from_data cannot be rebuilt by name (its data are not "
                         "in its config, only their hash): pass the Problem object itself")
    try:
        factory = FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; expected one of {', '.join(FACTORIES)}") from None
    return factory(**kwargs)
