"""Compare two optimizer snapshots (tools/optimizer_snapshot.py): prints ALL IDENTICAL or every difference."""
import sys, json, numpy as np
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
ma = json.load(open(sys.argv[1] + ".json")); mb = json.load(open(sys.argv[2] + ".json"))
bad = []
for k in sorted(set(a.files) | set(b.files)):
    if k not in a.files or k not in b.files:
        bad.append(f"missing {k}: old={k in a.files} new={k in b.files}"); continue
    x, y = a[k], b[k]
    if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
        d = np.nanmax(np.abs(x - y)) if x.shape == y.shape else "shape"
        bad.append(f"differs {k}: max|diff|={d}")
for k in sorted(set(ma) | set(mb)):
    if ma.get(k) != mb.get(k):
        bad.append(f"meta {k}: old={ma.get(k)} new={mb.get(k)}")
print("\n".join(bad) if bad else "ALL IDENTICAL", f"({len(a.files)} arrays, {len(ma)} runs)")
