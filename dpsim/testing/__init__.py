"""Property-based testing with dpsim (needs hypothesis and scipy).

* :mod:`dpsim.testing.strategies` — hypothesis strategies: ``problems``, ``optimizers`` (from the
  optimizers' declared hyperparameter ranges), ``privacy_params``, ``gradient_tables``,
  ``simulations``; for properties of the papers' bounds ``bound_params`` (C, σ, b, β, s, T),
  ``dp2_phases``, ``dp_budgets`` (ε, δ), ``tcdp_params`` (ρ, ω) and ``seeds``.
* :mod:`dpsim.testing.assertions` — ``assert_bound_holds``, ``assert_distribution_matches``,
  ``assert_privacy_holds``: a claim against simulation at a stated false-alarm rate, with the
  numbers and the reproducing seed in the message.
* :mod:`dpsim.testing.plugin` — the pytest plugin (``pytest -p dpsim.testing.plugin``): the
  ``dpsim-ci`` hypothesis profile, the ``dpsim_seed`` fixture, ``--dpsim-trials``.

A tutorial is in ``docs/property-testing.md``.

Examples
--------
Strategies are ordinary hypothesis strategies; ``find`` shrinks to the smallest example:

>>> from hypothesis import find
>>> from dpsim.testing import strategies
>>> find(strategies.seeds(), lambda seed: seed > 10)
11
"""

from ..extras import require as _require

_require("hypothesis", "dpsim.testing")
from . import strategies  # noqa: E402
from .assertions import (BoundViolation, assert_bound_holds, assert_distribution_matches,
                         assert_privacy_holds, scaled_trials, set_trials_scale)
from .strategies import (BoundParams, DP2Phases, DPBudget, GradientTable, PrivacyParams, Simulation,
                         TcdpParams, bound_params, dp2_phases, dp_budgets, gradient_tables, optimizers,
                         privacy_params, problems, seeds, simulations, tcdp_params)

__all__ = ["strategies", "BoundViolation", "assert_bound_holds", "assert_distribution_matches",
           "assert_privacy_holds", "scaled_trials", "set_trials_scale", "GradientTable",
           "PrivacyParams", "Simulation", "gradient_tables", "optimizers", "privacy_params",
           "problems", "simulations", "BoundParams", "DP2Phases", "DPBudget", "TcdpParams",
           "bound_params", "dp2_phases", "dp_budgets", "seeds", "tcdp_params"]
