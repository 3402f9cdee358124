"""bench/scale_out.py at its smallest, end to end, so it keeps running: two payouts on two networks with one
daemon and with one per network, then a few test events through one and two `vip serve` and delivered by
one and two daemons; every figure printed, every check passed. No figure is judged here (speed is for
the bench itself)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.e2e


def test_scale_out_bench_runs_every_side_and_checks_exactly_once(databases, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    # A generous bound, not a measure: 64 s on CI's machine, 239 s on a VM running at half speed.
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "scale_out.py"), "--payouts", "2", "--in-flight", "2",
         "--events", "12", "--seconds", "10", "--clients", "2", "--database-url", databases.server_url],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    for side in ("charges, 1 daemon(s): 2 payouts", "charges, 2 daemon(s): 2 payouts",
                 "API, 1 vip serve: 12 POST", "API, 2 vip serve: 12 POST",
                 "webhooks, 1 daemon(s): 24 deliveries", "webhooks, 2 daemon(s): 24 deliveries"):
        assert side in out, out
    assert out.count("local: 1 Disbursed logs, 1 operator transactions for 1 payouts") == 2, out
    assert out.count("local2: 1 Disbursed logs, 1 operator transactions for 1 payouts") == 2, out
    assert out.count("24 of 24 deliveries received, 0 duplicates: exactly once") == 2, out
    for figure in ("charges/s (1 daemon vs 1 per network)", "API requests/s (vip serve processes)",
                   "webhook deliveries/s (daemons)"):
        assert figure in out, out
    assert "load average" in out and out.rstrip().endswith("all checks: exactly once"), out
