"""The pytest plugin integrators use (vip.testing): the whole stack from one fixture, driven over public
HTTP the way the README's example test does."""

from __future__ import annotations

import os

import pytest

from tests.support.paths import REPO_ROOT
from vip.testing import FundedAccounts, VipClient, VipStack


def test_a_lender_test_onboards_a_borrower_through_the_plugin(vip_stack: VipStack, vip_client: VipClient,
                                                             vip_accounts: FundedAccounts):
    user = vip_client.create_user(external_id="plugin-borrower")
    borrower = vip_accounts.borrowers[0]
    connection = vip_client.connect_wallet(user["id"], borrower, chain_id=vip_stack.chain_id)
    assert connection["status"] == "active" and connection["type"] == "wallet"
    wallets = vip_client.get("/v1/wallets", user_id=user["id"])
    assert wallets.status == 200
    assert [w["address"] for w in wallets.body["wallets"]] == [borrower.address]
    # Errors come back in the spec's body, not as exceptions.
    missing = vip_client.get("/v1/users/usr_missing")
    assert (missing.status, missing.error_code) == (404, "ERR_NOT_FOUND")
    # Borrowers and lenders are distinct funded accounts, none of them the stack's own.
    own = {vip_accounts.minter.address}
    everyone = [a.address for a in vip_accounts.borrowers + vip_accounts.lenders]
    assert len(set(everyone)) == len(everyone) and not own & set(everyone)


def test_the_readme_example_test_passes(vip_stack: VipStack, vip_client: VipClient,
                                        vip_accounts: FundedAccounts):
    """The ten-line example in the README, run as written (a fresh borrower account, so it does not
    collide with the test above)."""
    readme = (REPO_ROOT / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    [example] = [f for name, f in namespace.items() if name.startswith("test_")]
    accounts = FundedAccounts(borrowers=vip_accounts.borrowers[1:], lenders=vip_accounts.lenders,
                              minter=vip_accounts.minter)
    example(vip_stack, vip_client, accounts)


@pytest.mark.e2e
def test_a_stack_that_cannot_start_says_why_in_one_line(tmp_path):
    """The plugin's start-up failure carries vip dev's own one-line error, not only a log's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VIP_CONFIG")}
    env["VIP_ANVIL_BIN"] = str(tmp_path / "no-anvil-here")
    with pytest.raises(RuntimeError) as failed:
        VipStack.start(tmp_path / "stack", env=env)
    message = str(failed.value)
    assert message.startswith("vip dev exited with 2: vip dev: ") and "VIP_ANVIL_BIN" in message
    assert "Traceback" not in message
