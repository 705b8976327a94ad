"""dpsim._jit_notice: one line on stderr before the first compilation of a dpsim Numba kernel in an
``announce_compiles`` block; nothing for a kernel already compiled or loaded from Numba's on-disk
cache, nothing with DPSIM_QUIET_COMPILE=1 or NUMBA_DISABLE_JIT=1."""

import importlib.util
import itertools
import sys
import textwrap
import time

import numba
import pytest
from numba.core import event

from dpsim import _jit_notice
from dpsim._jit_notice import announce_compiles

_count = itertools.count()

SOURCE = textwrap.dedent("""
    from numba import njit

    @njit(cache=True)
    def f(x):
        return 3 * x + 1

    @njit(cache=True)
    def g(x):
        return x * x - 2
""")


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """Nothing announced yet; the probe modules below (``jitprobe.*``) count as dpsim's."""
    monkeypatch.setattr(_jit_notice, "_announced", set())
    monkeypatch.setattr(_jit_notice, "_PACKAGE", "jitprobe")
    monkeypatch.delenv(_jit_notice.QUIET_ENV, raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")


def load(path, monkeypatch, name=None):
    """Import the file ``path`` as a new module ``jitprobe.<name>``: fresh dispatchers, which share
    the on-disk cache of every other import of that file."""
    name = f"jitprobe.m{next(_count)}" if name is None else name
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def probe_file(tmp_path):
    path = tmp_path / "probe_kernels.py"
    path.write_text(SOURCE)
    return path


def lines(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dpsim:")]


def test_first_compile_announced_once(probe_file, monkeypatch, capsys):
    mod = load(probe_file, monkeypatch)
    with announce_compiles("opt on prob"):
        assert mod.f(2) == 7       # compiles: the notice
        assert mod.g(3) == 7       # a second compile in the same block: nothing more
        assert mod.f(2.5) == 8.5   # a new signature compiles too: nothing more
    out = lines(capsys)
    assert len(out) == 1, out
    assert out[0].startswith("dpsim: compiling Numba kernels for opt on prob (first use")
    assert f"cached in the __pycache__ folders next to the dpsim modules, e.g. " \
           f"{probe_file.parent / '__pycache__'})" in out[0]
    assert mod.f.stats.cache_misses and not mod.f.stats.cache_hits


def test_same_what_stays_silent_for_the_process(probe_file, monkeypatch, capsys):
    with announce_compiles("w"):
        load(probe_file, monkeypatch).f(1)
    assert len(lines(capsys)) == 1
    with announce_compiles("w"):  # another compilation, same what: silent
        load(probe_file, monkeypatch).g(1.5)
    assert lines(capsys) == []
    with announce_compiles("another"):  # a different what speaks once
        load(probe_file, monkeypatch).g(1j)
    assert [ln.split(" (")[0] for ln in lines(capsys)] == [
        "dpsim: compiling Numba kernels for another"]


def test_cached_or_compiled_kernels_say_nothing(probe_file, monkeypatch, capsys):
    first = load(probe_file, monkeypatch)
    first.f(4)  # compiled outside any block, saved to probe_file's __pycache__
    assert lines(capsys) == []
    with announce_compiles("again"):
        first.f(5)  # compiled already in this process
    assert lines(capsys) == []
    second = load(probe_file, monkeypatch)  # fresh dispatcher: loads f(int64) from the disk cache
    with announce_compiles("again"):
        assert second.f(4) == 13
    assert dict(second.f.stats.cache_hits) and not dict(second.f.stats.cache_misses)
    assert lines(capsys) == []


def test_other_packages_are_not_announced(probe_file, monkeypatch, capsys):
    mod = load(probe_file, monkeypatch, name="elsewhere_probe")
    with announce_compiles("x"):
        mod.f(1)
    assert lines(capsys) == []


def test_module_filter():
    assert _jit_notice._watched("jitprobe") and _jit_notice._watched("jitprobe.sub")
    assert not _jit_notice._watched("jitprobex") and not _jit_notice._watched(None)


def test_default_filter_is_dpsim(monkeypatch, capsys):
    monkeypatch.setattr(_jit_notice, "_PACKAGE", "dpsim")
    assert _jit_notice._watched("dpsim") and _jit_notice._watched("dpsim.fast.block")
    assert not _jit_notice._watched("dpsimx") and not _jit_notice._watched("numba.np.arraymath")
    ns = {"__name__": "dpsim._jit_notice_test_probe"}  # a function that says it is dpsim's
    exec("def h(x):\n    return x + 40\n", ns)
    h = numba.njit(ns["h"])
    with announce_compiles("real filter"):
        assert h(2) == 42
    out = lines(capsys)
    assert len(out) == 1 and "for real filter (" in out[0]
    # not cached (no cache=True): the line names the default place of dpsim's cached kernels
    assert out[0].endswith("cached in the __pycache__ folders next to the dpsim modules)")


def test_numba_cache_dir_is_named(probe_file, monkeypatch, tmp_path, capsys):
    cache = tmp_path / "numba-cache"
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(cache))
    mod = load(probe_file, monkeypatch)
    with announce_compiles("c"):
        mod.f(1)
    assert lines(capsys)[0].endswith(f"cached in NUMBA_CACHE_DIR={cache})")


def test_quiet_env(probe_file, monkeypatch, capsys):
    monkeypatch.setenv("DPSIM_QUIET_COMPILE", "1")
    with announce_compiles("q"):
        load(probe_file, monkeypatch).f(1)
    assert lines(capsys) == []
    monkeypatch.setenv("DPSIM_QUIET_COMPILE", "0")  # 0 counts as unset
    with announce_compiles("q"):
        load(probe_file, monkeypatch).g(1)  # (f(int64) would load from the disk cache now)
    assert len(lines(capsys)) == 1


def test_nested_blocks_innermost_speaks(probe_file, monkeypatch, capsys):
    with announce_compiles("outer"):
        with announce_compiles("inner"):
            load(probe_file, monkeypatch).f(1)
        load(probe_file, monkeypatch).g(1)  # back in the outer block
    assert [ln.split(" (")[0].rsplit(" ", 1)[1] for ln in lines(capsys)] == ["inner", "outer"]


def test_listener_removed_and_cheap(monkeypatch):
    registered = event._registered["numba:compile"]
    before = list(registered)
    with announce_compiles("cheap"):
        assert len(registered) == len(before) + 1
    assert registered == before
    with pytest.raises(ZeroDivisionError):
        with announce_compiles("cheap"):
            1 / 0
    assert registered == before
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        with announce_compiles("cheap"):
            pass
    per_block = (time.perf_counter() - t) / n
    assert per_block < 200e-6, per_block  # a few microseconds; loose for a busy machine


def test_disable_jit_does_nothing(monkeypatch):
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    registered = event._registered["numba:compile"]
    before = list(registered)
    with announce_compiles("nojit"):
        assert registered == before


def test_disable_jit_subprocess(tmp_path, jit_on_off):
    """With NUMBA_DISABLE_JIT=1 a dpsim function runs as Python: no notice, no error."""
    code = textwrap.dedent("""
        import numba
        from dpsim._jit_notice import announce_compiles
        ns = {"__name__": "dpsim._probe"}
        exec("def h(x):\\n    return x + 1\\n", ns)
        h = numba.njit(cache=True)(ns["h"])
        with announce_compiles("nojit"):
            print(h(1))
    """)
    out = jit_on_off(code, settings=("off",), cwd=tmp_path, env={"DPSIM_QUIET_COMPILE": None}).off
    assert out.stdout.strip() == "2" and "dpsim: compiling" not in out.stderr
