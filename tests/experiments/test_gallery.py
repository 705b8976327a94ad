"""``experiments.gallery``: publishing a finished reproduction (provenance header, small PNGs, links)
and the status of a results cache, against the session's tiny-scale reproduction (``tiny_all``)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from dpsim import experiments
from dpsim.experiments import dp2_logistic, gallery, pipeline

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _manifests(tmp: Path) -> dict:
    """``{name: manifest}`` of the finished tiny run of every experiment (the key LATEST names)."""
    return {n: json.loads((pipeline.latest_dir(tmp / "results" / n / "tiny") / "manifest.json")
                          .read_text()) for n in experiments.names()}


def _copy_figures(src: Path, dst: Path) -> Path:
    """The reproduction's report files and PNGs (no PDFs) copied to ``dst``."""
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.suffix in (".png", ".md", ".json"):
            shutil.copy2(p, dst / p.name)
    return dst


@pytest.fixture(scope="module")
def published(tiny_all, tmp_path_factory):
    out = tmp_path_factory.mktemp("gallery") / "gallery"
    info = gallery.publish(tiny_all.tmp / "results", tiny_all.tmp / "out", out, source=ROOT)
    return out, info


def test_header_fields(tiny_all, published):
    out, info = published
    ms = _manifests(tiny_all.tmp)
    text = (out / "REPORT.md").read_text()
    assert text.startswith("# dpsim reproduction gallery: scale `tiny`")
    assert not info["partial"] and "PARTIAL" not in text
    # commit: recorded per cell, else the source checkout's HEAD
    recorded = {e["commit"] for m in ms.values() for e in m["cells"].values() if e.get("commit")}
    commits = recorded or {gallery.source_commit(ROOT)}
    assert set(info["commits"]) == commits
    for c in commits:
        assert f"`{c}`" in text
    # date range and times, recomputed from the manifests
    ivs = [(e["t_start"], e["t_stop"]) for m in ms.values() for e in m["cells"].values()]
    assert info["first_cell"] == min(a for a, _ in ivs) and info["last_cell"] == max(b for _, b in ivs)
    assert f"{gallery._utc(info['first_cell'])} → {gallery._utc(info['last_cell'])}" in text
    cpu = sum(e["cpu_time_s"] for m in ms.values() for e in m["cells"].values())
    assert info["cpu_s"] == round(cpu, 1)
    assert 0 < info["wall_s"] <= info["span_s"] + 0.1 and info["sessions"] >= 1
    # one tiny run, no pause of 10 minutes between its cells: wall == span
    assert info["sessions"] == 1 and info["wall_s"] == info["span_s"]
    # machine and software
    mach = gallery.machine_info()
    assert f"{mach['cpu']}, {mach['logical_cores']} logical cores, {mach['ram_gib']} GiB RAM" in text
    py = {m["versions"]["python"] for m in ms.values()}
    npv = {m["versions"]["numpy"] for m in ms.values()}
    assert f"Python {', '.join(sorted(py))}, NumPy {', '.join(sorted(npv))}" in text
    # cells per experiment, in the table and in gallery.json
    rows = {r["name"]: r for r in info["experiments"]}
    assert list(rows) == experiments.names()
    for name, m in ms.items():
        assert rows[name]["cells"] == len(m["cells"])
        assert re.search(rf"^\| {name} \| {len(m['cells'])} \|", text, re.M)
    assert json.loads((out / "gallery.json").read_text()) == json.loads(json.dumps(info))
    # the report follows the header unchanged apart from its links
    assert "# dpsim reproduction report" in text


def test_every_png_small_and_present(tiny_all, published):
    from PIL import Image

    out, info = published
    entries = json.loads((tiny_all.tmp / "out" / "report.json").read_text())
    pngs = [x for e in entries.values() for f in e["figures"] for x in f["files"] if x.endswith(".png")]
    assert len(pngs) == sum(len(experiments.get(n).figures) for n in experiments.names())
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(pngs)
    total = 0
    for x in pngs:
        p, src = out / "figures" / x, tiny_all.tmp / "out" / x
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC, x
        assert len(data) < src.stat().st_size, x
        assert len(data) <= gallery.MAX_BYTES, x
        with Image.open(p) as im:
            assert im.width <= gallery.MAX_WIDTH and im.mode == "P", x
        total += len(data)
    assert info["figures_bytes"] == total
    assert f"{len(pngs)} PNGs, {total / 1024:.0f} KiB in all" in (out / "REPORT.md").read_text()


def test_links_resolve(published):
    out, _ = published
    for t in LINK.findall((out / "README.md").read_text()):
        assert (out / t).exists(), t
    text = (out / "REPORT.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    targets = LINK.findall(text)
    assert targets
    for t in targets:
        if t.startswith("#"):
            assert t[1:] in anchors, t
        else:
            assert (out / t).is_file(), t
            assert t.startswith("figures/") and t.endswith(".png"), t
    assert ".pdf" not in text


def test_incomplete_is_refused(tiny_all, tmp_path):
    figs = _copy_figures(tiny_all.tmp / "out", tmp_path / "figs")
    gone = "fig_dpsgd_logistic.png"
    (figs / gone).unlink()
    entries = json.loads((figs / "report.json").read_text())
    del entries["ctcdp_quadratic"]
    (figs / "report.json").write_text(json.dumps(entries))
    out = tmp_path / "gallery"
    some = ["dpsgd_logistic", "pagan_absreg", "ctcdp_quadratic"]  # a few figures to encode
    with pytest.raises(gallery.Incomplete) as err:
        gallery.publish(tiny_all.tmp / "results", figs, out, source=ROOT, experiments=some)
    msg = str(err.value)
    assert gone in msg and "ctcdp_quadratic: no report section" in msg and "--allow-partial" in msg
    assert not out.exists()  # nothing written before the checks pass

    info = gallery.publish(tiny_all.tmp / "results", figs, out, source=ROOT, allow_partial=True,
                           experiments=some)
    text = (out / "REPORT.md").read_text()
    assert info["partial"] and "**PARTIAL.**" in text
    assert any(gone in g for g in info["missing"])
    assert any(g.startswith("ctcdp_quadratic:") for g in info["missing"])
    assert "| ctcdp_quadratic (missing) |" in text
    assert f"*(figure `{gone}` missing from this reproduction)*" in text
    assert not (out / "figures" / gone).exists()
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "fig_pagan_absreg.png", "fig_pagan_absreg_curves.png"]
    for t in LINK.findall(text):
        assert t.startswith("#") or (out / t).is_file(), t


def test_unfinished_run_and_scale_are_refused(tiny_all, tmp_path):
    # results of one experiment whose manifest says the run did not finish
    res = tmp_path / "results"
    shutil.copytree(tiny_all.tmp / "results" / "dpsgd_logistic", res / "dpsgd_logistic")
    mpath = pipeline.latest_dir(res / "dpsgd_logistic" / "tiny") / "manifest.json"
    m = json.loads(mpath.read_text())
    m.pop("complete")
    mpath.write_text(json.dumps(m))
    with pytest.raises(gallery.Incomplete, match="dpsgd_logistic: the run under .* did not finish"):
        gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g", source=ROOT,
                        experiments=["dpsgd_logistic"])
    with pytest.raises(gallery.Incomplete, match="no report section at scale 'full'"):
        gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g", source=ROOT, scale="full",
                        experiments=["dpsgd_logistic"])


def test_cells_without_commit_need_source(tiny_all, tmp_path):
    res = tmp_path / "results"
    shutil.copytree(tiny_all.tmp / "results" / "dpsgd_logistic", res / "dpsgd_logistic")
    mpath = pipeline.latest_dir(res / "dpsgd_logistic" / "tiny") / "manifest.json"
    m = json.loads(mpath.read_text())
    for e in m["cells"].values():
        e.pop("commit", None)
    m.pop("commit", None)
    mpath.write_text(json.dumps(m))
    with pytest.raises(ValueError, match="pass --source"):
        gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g", experiments=["dpsgd_logistic"])
    with pytest.raises(ValueError, match="not a git checkout"):
        gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g", source=tmp_path,
                        experiments=["dpsgd_logistic"])
    # with a recorded commit no source is needed, and the recorded one is published
    for e in m["cells"].values():
        e["commit"] = "0123456789abcdef0123456789abcdef01234567"
    mpath.write_text(json.dumps(m))
    info = gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g", experiments=["dpsgd_logistic"])
    assert info["commits"] == ["0123456789abcdef0123456789abcdef01234567"]
    assert info["commit_source"] is None
    assert "(recorded with every cell)" in (tmp_path / "g" / "REPORT.md").read_text()
    # some cells record their commit, others (a run resumed by an unversioned copy) do not:
    # those need the source too, and both commits are published
    first = next(iter(m["cells"].values()))
    first.pop("commit")
    mpath.write_text(json.dumps(m))
    with pytest.raises(ValueError, match=r"1 of the \d+ cells of dpsgd_logistic .* pass --source"):
        gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g2", experiments=["dpsgd_logistic"])
    info = gallery.publish(res, tiny_all.tmp / "out", tmp_path / "g2", source=ROOT,
                           experiments=["dpsgd_logistic"])
    row = info["experiments"][0]
    assert row["commit_recorded"] is False and len(row["commits"]) == 2
    assert row["commits"][0] == "0123456789abcdef0123456789abcdef01234567"
    assert info["commit_source"] == str(ROOT.resolve())


def test_status_counts_match_manifests(tiny_all):
    st = gallery.status(tiny_all.tmp / "results", "tiny", figures_dir=tiny_all.tmp / "out")
    ms = _manifests(tiny_all.tmp)
    rows = {r["name"]: r for r in st["experiments"]}
    assert list(rows) == experiments.names()
    for name, m in ms.items():
        r = rows[name]
        assert r["key"] == m["key"]
        assert r["cells"] == len(m["cells"]) and r["files_missing"] == 0
        assert r["cpu_s"] == pytest.approx(sum(e["cpu_time_s"] for e in m["cells"].values()), abs=1e-9)
        assert r["complete"] and r["report"]
    labels = dp2_logistic.cell_labels(experiments.get("dp2_logistic").config("tiny"))
    assert rows["dp2_logistic"]["total"] == len(labels) and rows["dp2_logistic"]["remaining"] == 0
    assert rows["dp2_logistic"]["eta_cpu_s"] == 0
    assert rows["dpsgd_logistic"]["total"] is None  # no cell_labels in its module
    assert st["total"]["cells"] == sum(len(m["cells"]) for m in ms.values())
    assert st["total"]["complete"]
    text = gallery.format_status(st)
    for name in ms:
        assert re.search(rf"^{name}\s+{rows[name]['key']}\s+{rows[name]['cells']}\s", text, re.M)


def test_status_of_a_partial_run(tiny_all, tmp_path):
    """A dp2 run with only some cells listed: remaining and ETA follow the definition."""
    exp = experiments.get("dp2_logistic")
    src = pipeline.latest_dir(tiny_all.tmp / "results" / "dp2_logistic" / "tiny")
    m = json.loads((src / "manifest.json").read_text())
    keep = sorted(m["cells"])[: len(m["cells"]) // 3]
    m["cells"] = {k: m["cells"][k] for k in keep}
    m.pop("complete", None)
    dst = tmp_path / "results" / "dp2_logistic" / "tiny" / m["key"]
    dst.mkdir(parents=True)
    (dst / "manifest.json").write_text(json.dumps(m))
    for k in keep[1:]:  # the first listed cell's file is gone
        shutil.copy2(src / f"{k}.npz", dst / f"{k}.npz")
    st = gallery.status(tmp_path / "results", "tiny", experiments=["dp2_logistic"])
    (r,) = st["experiments"]
    total = len(dp2_logistic.cell_labels(exp.config("tiny")))
    cpu = sum(m["cells"][k]["cpu_time_s"] for k in keep)
    assert (r["cells"], r["total"], r["remaining"], r["files_missing"]) == (
        len(keep), total, total - len(keep), 1)
    assert not r["complete"] and r["report"] is None
    assert r["eta_cpu_s"] == pytest.approx((total - len(keep)) * cpu / len(keep), rel=1e-12)
    assert (st["total"]["remaining"], st["total"]["eta_cpu_s"]) == (r["remaining"], r["eta_cpu_s"])
    par = st["total"]["parallelism_last_session"]
    assert par is not None and r["eta_wall_s"] == pytest.approx(r["eta_cpu_s"] / par, rel=1e-12)
    assert r["in_progress"] == {}
    # a cell being computed has left a checkpoint (dpsim.checkpoint): status says how far it is
    todo = next(lab for lab in dp2_logistic.cell_labels(exp.config("tiny")) if lab not in keep)
    side = dst / "partial" / todo / "call-0001.json"
    side.parent.mkdir(parents=True)
    side.write_text(json.dumps({"t": 40, "steps": 120, "wall_s": 7200.0, "written": 0.0}))
    (r,) = gallery.status(tmp_path / "results", "tiny", experiments=["dp2_logistic"])["experiments"]
    assert r["in_progress"] == {todo: [{"call": 1, "t": 40, "steps": 120, "wall_s": 7200.0,
                                        "written": 0.0}]}
    assert (f"dp2_logistic: {todo} in progress: simulation 1 checkpointed at step 40/120 after "
            "2.00 h (1970-01-01 00:00 UTC), ≈ 4.00 h left at this rate") in gallery.format_status(
                {**st, "experiments": [r]})


def test_sessions():
    ivs = [(0, 10), (5, 30), (100, 110), (800, 900), (905, 1000), (1601, 1700)]
    # 100 starts 70 s after the latest stop (30): same session; 800 starts 690 s after 110 and
    # 1601 starts 601 s after 1000: new sessions
    assert gallery.sessions(ivs, gap=600) == [(0, 110), (800, 1000), (1601, 1700)]
    assert gallery.sessions([], gap=600) == []
    assert gallery.sessions(ivs, gap=0) == [(0, 30), (100, 110), (800, 900), (905, 1000), (1601, 1700)]
    with pytest.raises(ValueError, match="gap"):
        gallery.sessions(ivs, gap=-1)


def test_sessions_gap_is_from_latest_stop():
    # the second interval starts 700 s after the first started but 100 s after it stopped
    assert gallery.sessions([(0, 600), (700, 720)], gap=600) == [(0, 720)]
    assert gallery.sessions([(0, 10), (5, 20), (621, 630)], gap=600) == [(0, 20), (621, 630)]


def test_shrink_png_limit(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)).save(tmp_path / "noise.png")
    with pytest.raises(ValueError, match="noise.png stays at"):
        gallery.shrink_png(tmp_path / "noise.png", tmp_path / "o.png", max_bytes=2000)
    assert not (tmp_path / "o.png").exists()
    s = gallery.shrink_png(tmp_path / "noise.png", tmp_path / "o.png", max_width=120)
    with Image.open(tmp_path / "o.png") as im:
        assert im.size == (120, 120) and s["width"] == 120


def test_cli(tiny_all, tmp_path, capsys, monkeypatch):
    # the command publishes every registered experiment: two here, to keep the test short
    monkeypatch.setattr(gallery, "registered_names", lambda: ["dpsgd_logistic", "ctcdp_quadratic"])
    parser = argparse.ArgumentParser(prog="dpsim")
    gallery.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gallery", "status", "--results", str(tiny_all.tmp / "results"),
                              "--scale", "tiny"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert "ctcdp_quadratic" in out and "dp2_logistic" not in out
    figs = _copy_figures(tiny_all.tmp / "out", tmp_path / "figs")
    (figs / "fig_dpsgd_logistic.png").unlink()
    argv = ["gallery", "publish", "--results", str(tiny_all.tmp / "results"), "--figures",
            str(figs), "--out", str(tmp_path / "g"), "--source", str(ROOT)]
    args = parser.parse_args(argv)
    with pytest.raises(ValueError, match="fig_dpsgd_logistic.png"):
        args.handler(args)
    args = parser.parse_args(argv + ["--allow-partial"])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith("PARTIAL gallery:")
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        args = parser.parse_args(["gallery", "status", "--results", str(tmp_path), "--scale", "huge"])
        args.handler(args)


def test_other_key_is_flagged(tiny_all, tmp_path):
    """Results computed under another key than the publishing checkout's (an older config) are
    published, with a line saying so."""
    res, figs = tmp_path / "results", _copy_figures(tiny_all.tmp / "out", tmp_path / "figs")
    src = pipeline.latest_dir(tiny_all.tmp / "results" / "ctcdp_quadratic" / "tiny")
    old = "0" * 16
    shutil.copytree(src, res / "ctcdp_quadratic" / "tiny" / old)
    mpath = res / "ctcdp_quadratic" / "tiny" / old / "manifest.json"
    m = json.loads(mpath.read_text())
    m["key"] = old
    mpath.write_text(json.dumps(m))
    entries = json.loads((figs / "report.json").read_text())
    entries["ctcdp_quadratic"]["key"] = old
    (figs / "report.json").write_text(json.dumps(entries))
    info = gallery.publish(res, figs, tmp_path / "g", source=ROOT, experiments=["ctcdp_quadratic"])
    (row,) = info["experiments"]
    assert row["key"] == old and row["current_key"] == src.name
    assert (f"ctcdp_quadratic (`{old}`, now `{src.name}`)"
            in (tmp_path / "g" / "REPORT.md").read_text())


def test_update_replaces_one_experiment(tiny_all, published, tmp_path, capsys):
    """``update`` swaps one experiment's section, verdict line, PNGs and row into a published
    gallery and leaves every other experiment's text and figures byte for byte."""
    from support.experiment_fixtures import reproduce_tiny

    src, _ = published
    out = tmp_path / "g"
    shutil.copytree(src, out)
    before = (out / "REPORT.md").read_text()
    old = json.loads((out / "gallery.json").read_text())
    name = "ctcdp_quadratic"
    reproduce_tiny([name], tmp_path / "new")          # a new run: other results/figure folders
    new_results, new_figs = tmp_path / "new" / "results", tmp_path / "new" / "out"
    keep_png = {p.name: p.read_bytes() for p in (out / "figures").iterdir()}
    info = gallery.update(new_results, new_figs, out, [name], source=ROOT)
    text = (out / "REPORT.md").read_text()

    old_pre, old_secs = gallery._split_report(before[before.index("# dpsim reproduction report"):])
    pre, secs = gallery._split_report(text[text.index("# dpsim reproduction report"):])
    assert list(secs) == list(old_secs)
    for n in secs:
        if n != name:
            assert secs[n] == old_secs[n], n
    assert str(new_results / name) in secs[name] and str(new_results) not in old_secs[name]
    new_report = (new_figs / "REPORT.md").read_text()
    assert gallery._summary_row(pre, name) == gallery._summary_row(new_report, name)
    # the new PNGs, re-encoded; the others untouched
    entries = json.loads((new_figs / "report.json").read_text())
    mine = {x for f in entries[name]["figures"] for x in f["files"] if x.endswith(".png")}
    assert mine and all(f"figures/{x}" in secs[name] for x in mine)
    for x, data in keep_png.items():
        if x not in mine:
            assert (out / "figures" / x).read_bytes() == data, x
    for x in mine:
        assert info["figures"][x]["source_bytes"] == (new_figs / x).stat().st_size
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(info["figures"])
    for t in LINK.findall(text):
        assert t.startswith("#") or (out / t).is_file(), t
    # provenance: the row from the new manifest, totals over the rows, the update recorded
    m = json.loads((pipeline.latest_dir(new_results / name / "tiny") / "manifest.json").read_text())
    rows = {r["name"]: r for r in info["experiments"]}
    assert rows[name]["cells"] == len(m["cells"])
    assert rows[name]["cpu_s"] == round(sum(e["cpu_time_s"] for e in m["cells"].values()), 1)
    assert [r["name"] for r in info["experiments"]] == [r["name"] for r in old["experiments"]]
    for r in old["experiments"]:
        if r["name"] != name:
            assert rows[r["name"]] == r
    assert info["cpu_s"] == round(sum(r["cpu_s"] for r in info["experiments"]), 1)
    (u,) = info["updates"]
    assert u["experiments"] == [name] and u["replaced"][name]["cells"] == \
        {r["name"]: r for r in old["experiments"]}[name]["cells"]
    assert info["wall_s"] == round(old["wall_s"] + u["wall_s"], 1)
    assert info["sessions"] == old["sessions"] + u["sessions"]
    assert f"| update {u['published']} | recomputed {name}:" in text
    # the code row names every checkout read for cells without a recorded commit
    assert info["commit_source"] == old["commit_source"]      # the first publication's, kept
    sources = [x for x in (old["commit_source"], u["source"]) if x]
    code_row = next(line for line in text.splitlines() if line.startswith("| code |"))
    assert all(f"`{x}`" in code_row for x in sources)
    assert ("recorded with every cell" in code_row) == (not sources)
    assert json.loads((out / "gallery.json").read_text()) == json.loads(json.dumps(info))
    # refused: an experiment missing from the new reproduction, a folder without a gallery
    with pytest.raises(gallery.Incomplete, match="dp2_logistic"):
        gallery.update(new_results, new_figs, out, ["dp2_logistic"], source=ROOT)
    with pytest.raises(ValueError, match="unknown experiment"):
        gallery.update(new_results, new_figs, out, ["nope"], source=ROOT)
    with pytest.raises(ValueError, match="no published gallery"):
        gallery.update(new_results, new_figs, tmp_path / "new", [name], source=ROOT)
    assert (out / "REPORT.md").read_text() == text   # nothing written by a refused update
    # the command line
    parser = argparse.ArgumentParser(prog="dpsim")
    gallery.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gallery", "update", name, "--results", str(new_results),
                              "--figures", str(new_figs), "--out", str(out), "--source", str(ROOT)])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith("gallery updated:")
    assert len(json.loads((out / "gallery.json").read_text())["updates"]) == 2


def test_withdraw_then_update(tiny_all, published, tmp_path, capsys):
    """``withdraw`` replaces an experiment's section by a dated notice with the reason, its verdict
    line by ``withdrawn: <why>``, deletes its PNGs and keeps every other section and figure byte
    for byte; a later ``update`` of the experiment replaces the notice like any section."""
    src, _ = published
    out = tmp_path / "g"
    shutil.copytree(src, out)
    before = (out / "REPORT.md").read_text()
    old = json.loads((out / "gallery.json").read_text())
    name = "ctcdp_quadratic"
    _, old_secs = gallery._split_report(before[before.index("# dpsim reproduction report"):])
    mine = gallery._figure_names(old_secs[name])
    assert mine
    keep_png = {p.name: p.read_bytes() for p in (out / "figures").iterdir() if p.name not in mine}
    why = "its problem cannot discriminate the methods (review, issue 31)"
    # refused before anything is written: no reason, a '|' in it, an unknown experiment
    for bad, match in (("", "reason"), ("a | b", "no '|'")):
        with pytest.raises(ValueError, match=match):
            gallery.withdraw(out, [name], bad)
    with pytest.raises(ValueError, match="unknown experiment"):
        gallery.withdraw(out, ["nope"], why)
    assert (out / "REPORT.md").read_text() == before
    info = gallery.withdraw(out, [name], why)
    text = (out / "REPORT.md").read_text()
    pre, secs = gallery._split_report(text[text.index("# dpsim reproduction report"):])
    assert list(secs) == list(old_secs)
    for n in secs:
        if n != name:
            assert secs[n] == old_secs[n], n
    assert "**Withdrawn**" in secs[name] and why in secs[name] and not gallery._figure_names(secs[name])
    assert secs[name].splitlines()[:2] == old_secs[name].splitlines()[:2]    # anchor and heading
    assert gallery._summary_row(pre, name) == f"| [{name}](#{name}) | tiny | withdrawn: {why} |"
    assert sorted(p.name for p in (out / "figures").iterdir()) == sorted(keep_png)
    for x, data in keep_png.items():
        assert (out / "figures" / x).read_bytes() == data
    assert sorted(info["figures"]) == sorted(keep_png)
    rows = {r["name"]: r for r in info["experiments"]}
    assert rows[name]["withdrawn"] == info["published"] and rows[name]["figures"] == 0
    (w,) = info["withdrawals"]
    assert w["experiments"] == [name] and w["why"] == why
    assert w["keys"][name] == {r["name"]: r for r in old["experiments"]}[name]["key"]
    assert f"| withdrawn {w['published']} | {name}: {why}" in text
    assert f"| {name} (withdrawn) |" in text
    for t in LINK.findall(text):
        assert t.startswith("#") or (out / t).is_file(), t
    assert json.loads((out / "gallery.json").read_text()) == json.loads(json.dumps(info))
    # the command line
    parser = argparse.ArgumentParser(prog="dpsim")
    gallery.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gallery", "withdraw", "dpsgd_logistic", "--out", str(out),
                              "--why", "a second reason"])
    assert args.handler(args) == 0
    assert "withdrew dpsgd_logistic" in capsys.readouterr().out
    # an update replaces the notice and the row; the withdrawals stay as history
    from support.experiment_fixtures import reproduce_tiny

    reproduce_tiny([name], tmp_path / "new")
    info = gallery.update(tmp_path / "new" / "results", tmp_path / "new" / "out", out, [name],
                          source=ROOT)
    text = (out / "REPORT.md").read_text()
    _, secs = gallery._split_report(text[text.index("# dpsim reproduction report"):])
    assert "**Withdrawn**" not in secs[name] and gallery._figure_names(secs[name])
    assert "withdrawn" not in {r["name"]: r for r in info["experiments"]}[name]
    assert len(info["withdrawals"]) == 2
