"""``dpsim verify``'s checks, one module per paper (keys of docs/PAPERS.md).

* :mod:`.dp2` — [DP2] delayed preconditioners (bounds in :mod:`dpsim.analysis.delay`);
* :mod:`.pagan` — [PAGAN] private adaptive gradient methods (:mod:`dpsim.analysis.moments`);
* :mod:`.design` — [DESIGN] design principles for private adaptive optimizers
  (:mod:`dpsim.analysis.bias`);
* :mod:`.l2p` — [L2P] truncated CDP under a budget (:mod:`dpsim.analysis.tcdp`);
* :mod:`.adambc` — [ADAMBC] DP-AdamBC (:mod:`dpsim.analysis.concentration`);
* :mod:`.base` — :class:`~.base.CheckResult` and the :func:`~.base.check` registry.

Importing a paper's module registers its checks; :mod:`dpsim.analysis.verify` imports them all.
"""
