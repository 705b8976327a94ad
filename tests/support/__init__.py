"""What the tests share, in one package (``tests/support``), imported as ``support.<module>``.

``tests/`` has no ``__init__.py``: pytest (its default ``prepend`` import mode) puts ``tests/`` on
``sys.path`` when it loads ``tests/conftest.py``, so ``support`` imports from every test folder,
and each test module by its basename (basenames are unique across ``tests/``).

* :mod:`support.naive` — per-trial, per-example reference implementations (the oracles);
* :mod:`support.optimizer_setup` — per-name settings that let every registered optimizer run on a
  small test problem;
* :mod:`support.experiment_fixtures` — experiments reproduced at the tiny scale (``tiny_run``,
  the session's all-experiments run ``tiny_all``) and the check every experiment's figures and
  report pass;
* :mod:`support.figure_checks` — readability checks of a rendered matplotlib figure;
* :mod:`support.jit` — a snippet run in fresh interpreters with Numba's JIT off and on (the
  ``jit_on_off`` fixture of ``conftest.py``).
"""
