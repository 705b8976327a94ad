"""Plots of comparisons: :func:`curves` draws a :func:`dpsim.compare` Dataset (needs matplotlib,
the ``figures`` extra).

Examples
--------
>>> import dpsim.plot
>>> dpsim.plot.__all__
['curves']
"""

from __future__ import annotations

import numpy as np

__all__ = ["curves"]


def _pyplot():
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
            import os

            if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError('dpsim.plot needs matplotlib: pip install "dpsim[figures]"') from None
    return plt


def curves(ds, metric="excess_loss", *, configs="selected", ax=None, log=None, title=None):
    """Mean curve of ``metric`` per optimizer with its confidence band, ε in the legend.

    Parameters
    ----------
    ds : xarray.Dataset
        What :func:`dpsim.compare` returns.
    metric : str
        A recorded metric (``"loss"``, ``"excess_loss"``, ``"test_loss"``, ``"test_accuracy"``,
        ...); its ``<metric>_mean``/``_lo``/``_hi`` variables are drawn against ``step``.
    configs : {"selected", "all"}
        Each optimizer's selected configuration (``ds["selected"]``), or every valid
        configuration (thin lines, the selected one bold).
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    log : bool, optional
        Log-scaled y axis (default: for losses whose values are all positive).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if f"{metric}_mean" not in ds:
        have = sorted(v[:-5] for v in ds.data_vars if v.endswith("_mean"))
        raise ValueError(f"metric {metric!r} is not in this comparison; recorded: {', '.join(have)}")
    if configs not in ("selected", "all"):
        raise ValueError(f"configs must be 'selected' or 'all', got configs={configs!r}")
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
    else:
        fig = ax.figure
    steps = np.asarray(ds["step"].values)
    grids = {}
    try:
        import json

        grids = json.loads(ds.attrs.get("grids", "{}"))
    except ValueError:
        pass
    delta = ds.attrs.get("delta")
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for o, name in enumerate(ds["optimizer"].values):
        color = colors[o % len(colors)]
        sel = int(ds["selected"].values[o])
        chosen = [sel] if configs == "selected" else [int(j) for j in np.flatnonzero(ds["valid"].values[o])]
        for j in chosen:
            mean = ds[f"{metric}_mean"].values[o, j]
            lo, hi = ds[f"{metric}_lo"].values[o, j], ds[f"{metric}_hi"].values[o, j]
            hp = ", ".join(f"{h}={ds[h].values[o, j]:g}" if isinstance(ds[h].values[o, j], (float, np.floating))
                           else f"{h}={ds[h].values[o, j]}" for h in grids.get(str(name), {}))
            eps = float(ds["epsilon"].values[o, j])
            eps_txt = "ε=∞ (non-private)" if not np.isfinite(eps) else f"ε={eps:.3g}"
            label = f"{name} ({hp}; {eps_txt})" if hp else f"{name} ({eps_txt})"
            bold = j == sel
            ax.plot(steps, mean, color=color, lw=2.0 if bold else 0.8, alpha=1.0 if bold else 0.5,
                    label=label if bold or configs == "all" else None)
            if bold:
                ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
    if log is None:
        vals = ds[f"{metric}_mean"].values
        log = metric != "test_accuracy" and bool(np.all(vals[np.isfinite(vals)] > 0))
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(metric.replace("_", " "))
    ci = ds.attrs.get("interval", "95% interval").split(" of")[0]
    ax.set_title(title if title is not None else
                 f"{metric.replace('_', ' ')}: mean over trials, band {ci}"
                 + (f"; ε at δ={delta:g}" if delta is not None else ""), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
