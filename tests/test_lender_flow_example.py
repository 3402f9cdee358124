"""examples/lender_flow.py, the lender's whole journey over public HTTP, runs green against a real stack
started by the pytest plugin (`vip dev` in a subprocess): the example in the README stays true."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO_ROOT
from vip.testing import VipClient, VipStack


def test_the_lender_flow_example_runs_end_to_end(vip_stack: VipStack):
    done = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "lender_flow.py"),
                           str(vip_stack.data_dir / "state.json")],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "the whole journey worked" in done.stdout
    for step in ("verified: 6/6 months", "succeeded in 0x", "events received and verified"):
        assert step in done.stdout, done.stdout
    # It leaves no endpoint behind to be retried against its closed receiver.
    endpoints = VipClient(vip_stack.base_url, vip_stack.api_key).get("/v1/webhook-endpoints")
    assert not [e for e in endpoints.body["webhook_endpoints"]
                if e["description"] == "lender_flow.py" and e["status"] == "active"], endpoints.body
