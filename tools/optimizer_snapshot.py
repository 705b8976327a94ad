"""Snapshot every optimizer's outputs (params, loss records, probes, ε) to compare two states of the code.
Usage: python tools/optimizer_snapshot.py OUT.npz  (then tools/compare_snapshots.py OLD.npz NEW.npz)"""
import sys, json, math, warnings
import numpy as np
import dpsim
from dpsim import optimizers, problems

warnings.filterwarnings("ignore")

def setup(name, prob):
    opt_kw, sim_kw = {}, {}
    if name == "pdp_sgd":
        opt_kw = dict(k=2, public_fraction=0.05)
    if name == "adadps":
        opt_kw = dict(public_fraction=0.05)
    if name in ("pasan", "pagan"):
        opt_kw = dict(radius=1e3)
    if name == "dp_sgd_ctcdp":
        try:
            from dpsim import ctcdp
        except ImportError:
            from dpsim.optimizers import ctcdp
        plan = ctcdp.plan(epsilon=1.0, delta=1e-5, steps=30, n=prob.n, clip=1.0)
        sim_kw = dict(sampling="fixed", batch_size=plan["batch_size"])
    return opt_kw, sim_kw

out = {}
meta = {}
probs = {"lsq": problems.least_squares(300, 6, seed=0),
         "logreg": problems.logistic_regression(400, 8, density=0.5, seed=1),
         "absreg": problems.absolute_regression(300, 6, seed=2)}
for pname, prob in probs.items():
    for name in optimizers.names():
        variants = [("default", {}, {})]
        if name.startswith("dp") and name not in ("dp_sgd_ctcdp",):
            variants.append(("banded", {"noise": "banded:3"}, {}))
            variants.append(("pertrial", {"noise_multiplier": [0.5, 1.0, 2.0]}, {}))
        if name.startswith("dp2") or name == "delayed_rmsprop":
            variants.append(("s", {"s1": 3, "s2": 5}, {}))
        if name == "dp_adam_stp":
            variants += [("rms", {"base": "rmsprop"}, {}), ("ada", {"base": "adagrad"}, {})]
        if name == "dp2_rmsprop":
            variants.append(("unbias", {"unbias": True}, {}))
        for samp in ("poisson", "fixed"):
            for vname, okw, skw in variants:
                ok, sk = setup(name, prob)
                ok = dict(ok); ok.update(okw)
                if name == "dp_sgd_ctcdp" and samp != "fixed":
                    continue
                kw = dict(steps=30, batch_size=16, trials=3, seed=5, record_every=10, sampling=samp)
                kw.update(sk); kw.update(skw)
                key = f"{pname}|{name}|{vname}|{samp}"
                try:
                    res = dpsim.simulate(prob, optimizers.get(name, **ok), **kw)
                except Exception as e:
                    meta[key] = {"error": f"{type(e).__name__}: {e}"}
                    continue
                out[key + "|params"] = res.params
                out[key + "|loss"] = res.loss
                for k, v in res.records.items():
                    out[key + "|probe_" + k] = v
                try:
                    eps = res.epsilon(1e-5, accountant="rdp" if samp == "fixed" else "pld")
                    eps = np.asarray(eps, dtype=float).tolist()
                except Exception as e:
                    eps = f"{type(e).__name__}: {e}"
                meta[key] = {"eps": eps}
np.savez(sys.argv[1], **out)
with open(sys.argv[1] + ".json", "w") as f:
    json.dump(meta, f, indent=0, sort_keys=True)
print(len(out), "arrays", len(meta), "runs")
