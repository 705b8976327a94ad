"""Figure for ``design_space`` (c): final training loss of every DP-Adam variant, DP-SGD and the
noiseless-preconditioner oracles with i.i.d. Gaussian and DP-BandMF noise (same σ), sparse
logistic regression; the [DESIGN] Fig. 3 table analogue (RECONSTRUCTED setting).

Standalone::  python -m dpsim.paper_figures.fig_design_variants results/design_space/quick [OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

import numpy as np

from dpsim.analysis import stats
from dpsim.experiments.pipeline import Saved

from . import design_common as common
from . import style

NAME = "fig_design_variants"
CLAIM = ("[DESIGN] §5.2: scale-then-privatize beats post-processing DP-Adam, which beats independent "
         "moment estimation (bias correction is at best slightly better than post-processing), with "
         "both i.i.d. and DP-MF noise; the noiseless preconditioner helps only together with STP.")
ORDER = ("dp_sgd", "dp_adam", "dp_adam_corrected", "dp_adam_bc", "dp_adam_ime", "dp_adam_stp",
         "dp_adam_noiseless_v", "dp_adam_stp_noiseless_v")


def _data(results):
    results = Saved.of(results)
    out = {}
    for lab, meta, res in common.load(results, "var"):
        noise, m = meta["noise"], meta["method"]
        mask, lr, es = common.chosen(results, lab)
        fin = res.excess_loss[-1][mask] if res.excess_loss is not None else res.loss[-1][mask]
        out[(noise, m)] = dict(final=fin, lr=lr, eps_scale=es, eps=common.eps_of(res),
                               sigma=res.config["hyperparameters"].get("noise_multiplier"))
    return out


def render(results: Mapping[str, object], out_dir) -> list[Path]:
    data = _data(results)
    noises = sorted({n for n, _ in data if n != "none"})
    with style.context():
        fig, axes = style.figure(1, 1, width=7.5, height=3.8)
        ax = axes[0][0]
        width = 0.8 / max(len(noises), 1)
        for j, noise in enumerate(noises):
            xs, ms, hs = [], [], []
            for i, m in enumerate(ORDER):
                r = data.get((noise, m))
                if r is None:
                    continue
                mean, half = stats.mean_ci(r["final"])
                xs.append(i + (j - (len(noises) - 1) / 2) * width)
                ms.append(mean)
                hs.append(0 if not np.isfinite(half) else half)
            # ε of the private methods only: the noiseless-v oracles are not private (ε = ∞)
            eps = max((data[(noise, m)]["eps"] for m in ORDER
                       if (noise, m) in data and np.isfinite(data[(noise, m)]["eps"])),
                      default=np.inf)
            sig = next(data[(noise, m)]["sigma"] for m in ORDER if (noise, m) in data)
            if noise == "gaussian":
                lab = f"i.i.d. Gaussian, σ={sig:.3g} (calibrated): {common.eps_label(eps)}"
            else:
                lab = (f"DP-BandMF ({noise}), same σ={sig:.3g}, not matched in ε: "
                       f"{common.eps_label(eps)}")
            ax.bar(xs, ms, width=width, yerr=hs, capsize=2, color=f"C{j}", label=lab)
        base = data.get(("none", "adam"))
        if base is not None:
            ax.axhline(float(np.mean(base["final"])), color=style.BASELINE_COLOR, linestyle="--",
                       label="Adam (non-private)")
        ax.set_xticks(range(len(ORDER)))
        ax.set_xticklabels([m + (" (oracle, not private)" if "noiseless" in m else "")
                            for m in ORDER], rotation=40, ha="right", rotation_mode="anchor",
                           fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel(r"final excess training loss $F(w_T) - F^\star$")
        ax.set_title("DP-Adam variants on sparse logistic regression (tuned η, ε_s); mean ± 95% CI; "
                     f"ε at δ = {style.fmt_float(common.DELTA)} (banded: no amplification)", fontsize=8.5)
        ax.legend(fontsize=7)
        return style.save(fig, out_dir, NAME)


def evaluate(results: Mapping[str, object]) -> dict:
    """Holds when, for each noise type, STP is significantly better than post-processing and
    post-processing is not significantly worse than IME; does not hold if STP is significantly
    worse than post-processing for any noise type."""
    data = _data(results)
    noises = sorted({n for n, _ in data if n != "none"})
    lines = ["Final excess training loss, mean ± 95% CI over the chosen grid point's trials. "
             + common.RECON, "", "| method | " + " | ".join(noises) + " |",
             "|---" * (len(noises) + 1) + "|"]
    for m in ORDER:
        cells = []
        for n in noises:
            r = data.get((n, m))
            if r is None:
                cells.append("–")
                continue
            mean, half = stats.mean_ci(r["final"])
            cells.append(f"{stats.fmt_ci(mean, half)} (η={r['lr']:g}, ε={common.eps_text(r['eps'])})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
    verdicts, notes = [], []
    for n in noises:
        pp, stp, ime = (data.get((n, k)) for k in ("dp_adam", "dp_adam_stp", "dp_adam_ime"))
        if pp is None or stp is None:
            continue
        d, lo, hi = stats.diff_ci(stp["final"], pp["final"])
        ranks = sorted(ORDER, key=lambda k: np.mean(data[(n, k)]["final"]) if (n, k) in data else np.inf)
        notes.append(f"{n}: STP − post-processing = {d:.2e} (95% CI [{lo:.2e}, {hi:.2e}]); ranking "
                     + " < ".join(ranks))
        v = None
        if lo > 0:
            v = False
        elif hi < 0:
            v = True
            if ime is not None:
                _, lo2, _ = stats.diff_ci(pp["final"], ime["final"])
                if lo2 > 0:
                    v = None
        verdicts.append(v)
    holds = (False if any(v is False for v in verdicts) else
             True if verdicts and all(verdicts) else None)
    return {"claim": CLAIM, "measured": "\n".join(lines), "holds": holds, "verdict": "; ".join(notes) + "."}


def main(argv=None) -> int:
    """``python -m dpsim.paper_figures.<this> RESULTS_DIR [OUT_DIR]``: render from saved results."""
    return style.cli_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
