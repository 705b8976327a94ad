"""Figure scripts of dpsim: one module per figure, reading only saved results.

Contract of a figure module ``paper_figures/fig_<name>.py`` (listed in its experiment's
``Experiment.figures``):

* ``render(results, out_dir) -> list[Path]``: ``results`` maps the experiment's labels to ``.npz``
  files written by ``dpsim.Result.save``; the module reads them with ``dpsim.load`` only and writes
  ``out_dir/fig_<name>.png`` and ``.pdf`` through :func:`paper_figures.style.save`.
* ``evaluate(results) -> dict``: ``claim`` (one line), ``measured`` (Markdown: the effect with its
  uncertainty, e.g. mean ± 95% CI over trials), ``holds`` (True / False / None = inconclusive) and
  ``verdict`` (one line on how ``holds`` was decided).  ``dpsim reproduce`` puts these in
  ``REPORT.md``.

Helpers shared by one experiment's figures live in ``<experiment>_common.py`` (e.g.
``dp2_common``); a figure reads the cell metadata and the tuning selections the experiment saved
through :class:`dpsim.experiments.pipeline.Saved` (``Saved.of(results)``) instead of parsing labels
or re-deriving choices.  Every figure script runs standalone through one entry point,
:func:`paper_figures.style.cli_main` (``python -m dpsim.paper_figures.<fig> RESULTS_DIR [OUT_DIR]``).

``paper_figures/out/`` is generated (``dpsim reproduce`` / ``make figures``) and not committed.
"""
