"""Accounting answers or refuses in bounded time and memory (issue 9, Build 4)."""

import subprocess
import sys
import time

import pytest

from dpsim import accounting


@pytest.mark.parametrize("sigma,q,steps", [(1e-3, 0.01, 100), (0.01, 0.01, 100), (0.03, 0.01, 100),
                                           (1.0, 0.01, 10 ** 9)])
def test_too_expensive_pld_is_refused_at_once_naming_the_parameter(sigma, q, steps):
    t0 = time.process_time()  # the call's CPU cost: the machine's other load does not count
    with pytest.raises(accounting.AccountingTooExpensiveError) as exc:
        accounting.epsilon(sigma, q, steps, 1e-5)
    assert time.process_time() - t0 < 2.0
    msg = str(exc.value)
    assert "noise_multiplier" in msg and "accountant='rdp'" in msg and "\n" not in msg
    assert accounting.epsilon(sigma, q, steps, 1e-5, accountant="rdp") > 0  # RDP answers


def test_expensive_but_allowed_pld_stays_within_10s_and_1gib():
    """The largest grid the guard lets through near σ = 0.1 (q = 0.01, T = 100): measured in a
    fresh process (CPU time of the call, so a loaded machine does not count; peak resident memory
    of the process)."""
    code = ("import time, resource; from dpsim import accounting as a; t = time.process_time(); "
            "e = a.epsilon(0.1, 0.01, 100, 1e-5); w = time.process_time() - t; "
            "print(e, w, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    eps, wall, rss_kib = map(float, out.stdout.split())
    assert eps == pytest.approx(354.2, rel=1e-3)
    assert wall < 10.0 and rss_kib * 1024 < 2 ** 30, (wall, rss_kib)
