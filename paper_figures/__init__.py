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

``paper_figures/out/`` is generated (``dpsim reproduce`` / ``make figures``) and not committed.
"""
