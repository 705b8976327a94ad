"""The DP-MF epsilon table of the README: epsilon of dp_sgd at sigma=1.7, T=1000, n=5000, b=64 (q=0.0128), delta=1e-5,
i.i.d. vs banded:4 vs banded:16, under poisson (unamplified DP-MF) and cyclic Poisson sampling."""
import time
import dpsim
from dpsim import optimizers, problems

prob = problems.logistic_regression(5000, 5, seed=0)
rows = []
for noise in ("gaussian", "banded:4", "banded:16"):
    bands = 1 if noise == "gaussian" else int(noise.split(":")[1])
    for sampling in ("poisson", "cyclic_poisson:16", f"cyclic_poisson:{bands}"):
        t0 = time.time()
        res = dpsim.simulate(prob, optimizers.get("dp_sgd", noise_multiplier=1.7, noise=noise),
                             steps=1000, batch_size=64, trials=1, seed=0, sampling=sampling,
                             record_every=1000, metrics=())
        out = {}
        for acc in ("pld", "rdp"):
            try:
                out[acc] = f"{res.epsilon(1e-5, accountant=acc):.4g}"
            except Exception as exc:
                out[acc] = type(exc).__name__
        rep = res.privacy_report(1e-5, accountant="rdp")
        print(f"| {noise:9s} | {sampling:17s} | {out['pld']:>28s} | {out['rdp']:>8s} | "
              f"{rep['correlated'] or 'i.i.d. (DP-SGD)'} | {time.time() - t0:.1f} s |", flush=True)
