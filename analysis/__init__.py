"""dpsim's analysis of the papers' bounds (installed as ``dpsim.analysis``).

Bound modules (closed forms and oracles, importable on their own): :mod:`.delay` ([DP2]),
:mod:`.moments` ([PAGAN]), :mod:`.bias` ([DESIGN]), :mod:`.tcdp` ([L2P]), :mod:`.concentration`
([ADAMBC]).  Shared pieces: :mod:`.stats` (confidence intervals), :mod:`._validate` (argument
checks).  :mod:`.checks` holds ``dpsim verify``'s checks, one module per paper, run by
:mod:`.verify`.
"""
