"""examples/lender_flow.py, the lender's whole journey over public HTTP, runs green against a real stack
started by the pytest plugin (`vip dev` in a subprocess): the example in the README stays true."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from vip.client import VipClient
from vip.testing import VipStack


@pytest.mark.e2e
def test_the_lender_flow_example_runs_end_to_end(vip_stack: VipStack):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "lender_flow.py"),
                           str(vip_stack.data_dir / "state.json")],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "the whole journey worked" in done.stdout
    for step in ("verified: 6/6 months", "succeeded in 0x", "events received and verified"):
        assert step in done.stdout, done.stdout
    # Its receiver is gone with it, and so is its endpoint (nothing is sent on to no one).
    endpoint_id = re.search(r"(whe_\w+) -> http", done.stdout).group(1)
    listed = VipClient(vip_stack.base_url, vip_stack.api_key).get("/v1/webhook-endpoints")
    assert listed.status == 200 and endpoint_id not in {e["id"] for e in listed.body["webhook_endpoints"]}
