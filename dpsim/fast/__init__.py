"""The fast paths of :func:`dpsim.simulate`, composed from the chain's pieces (layer 5).

* :mod:`dpsim.fast.compose` — a chain recognized by its pieces (:func:`~dpsim.fast.compose.composition`)
  and the elements of its structure key composed into one per-coordinate function
  (:func:`~dpsim.fast.compose.body`);
* :mod:`dpsim.fast.block` — the small-d block kernel (``Result.config["engine"] == "block"``):
  every step between two records in one compiled call;
* :mod:`dpsim.fast.release` — the per-step fused release (``"release"``): one pass per trial a step;
* :mod:`dpsim.fast.rows`, :mod:`dpsim.fast.simd`, :mod:`dpsim.fast.release_kernels` — their
  per-trial kernels (batches, clipped sums, projections, noise), none of which holds an
  optimizer's rule.

Which path a run takes: :func:`dpsim.explain`; for every registered optimizer, the generated
``docs/fast-paths.md``.
"""
