"""Disbursement on the real token contracts: Circle's FiatTokenV2_2 (behind FiatTokenProxy) and Tether's
mainnet TetherToken, built from the vendored sources. A failed charge says why, in its own code and
message, whatever the token: a blacklisted recipient or treasury, a paused token, a treasury short of
balance, a token taking a fee; the proxy's implementation upgraded under a confirmed intent changes
nothing. Also: the vendored sources are the upstream files, unchanged."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator

import pytest
from eth_account import Account
from sqlalchemy import select

from tests.support.api import ApiHarness
from tests.support.payments import (
    approve,
    balance,
    borrower,
    create_intent,
    daemon,
    new_lender,
    payments_api,
    post_json,
    wait_charge_settled,
    wait_intent_status,
)
from tests.support.real_tokens import VENDOR_DIR, RealTokenChain, real_chain  # noqa: F401 (fixture)
from vip.store.tables import disbursement_transactions, outbox_events

USD = 10**6
LOAN = 125 * USD


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_vendored_sources_are_the_upstream_files_unchanged():
    """Every vendored file is listed in SOURCES.json with the git blob hash of the upstream file at the
    named commit (check one with `git ls-tree <commit> <path>` in that repository), and matches it."""
    manifest = json.loads((VENDOR_DIR / "SOURCES.json").read_text())
    on_disk = {str(p.relative_to(VENDOR_DIR)) for p in VENDOR_DIR.rglob("*")
               if p.is_file() and p.parent.name != "artifacts"
               and p.name not in ("README.md", "SOURCES.json")}
    assert on_disk == set(manifest), "vendored files and SOURCES.json differ"
    for path, source in manifest.items():
        assert git_blob((VENDOR_DIR / path).read_bytes()) == source["git_blob"], f"{path} was edited"
        assert len(source["commit"]) == 40 and source["repository"].count("/") == 1
    licences = {p for p in manifest if p.endswith("LICENSE")}
    assert licences == {"circle/LICENSE", "circle/@openzeppelin/contracts/LICENSE"}
    artifacts = {p.stem: json.loads(p.read_text())["compiler"]
                 for p in (VENDOR_DIR / "artifacts").glob("*.json")}
    assert {name: version.split("+")[0] for name, version in artifacts.items()} == {
        "FiatTokenProxy": "0.6.12", "FiatTokenV2_2": "0.6.12", "SignatureChecker": "0.6.12",
        "TetherToken": "0.4.18"}


@pytest.fixture
async def pay_api(aiohttp_client, database_url, engine, real_chain) -> AsyncIterator[ApiHarness]:  # noqa: F811
    async with payments_api(aiohttp_client, database_url, engine, real_chain, charge_wait_s=20.0) as harness:
        yield harness


async def confirmed(api: ApiHarness, chain: RealTokenChain, database_url: str, token: str):
    """A fresh treasury and borrower, an intent of LOAN confirmed from the treasury's approval."""
    treasury = new_lender(chain, token)
    who = await borrower(api)
    intent = await create_intent(api, who, treasury, str(LOAN // USD), token)
    approval = approve(chain, intent, treasury)
    async with daemon(api.settings, database_url):
        await wait_intent_status(api, intent["id"], "approval_confirmed")
    return treasury, who, intent, approval


def allowance(chain: RealTokenChain, token: str, owner: str, spender: str) -> int:
    return int(chain.read(token, "allowance(address,address)", ["address", "address"], [owner, spender],
                          "uint256"))


async def failed_event(api: ApiHarness, charge_id: str) -> dict:
    async with api.engine.connect() as conn:
        rows = await conn.execute(select(outbox_events.c.data).where(outbox_events.c.type == "charge.failed"))
        events = [r.data["object"] for r in rows if r.data["object"]["id"] == charge_id]
    assert len(events) == 1
    return events[0]


# (case, token, what the issuer or the treasury does after the confirmation, code, words of the message)
CAUSES = [
    ("blacklisted recipient", "USDC", "blacklist_recipient", "ERR_RECIPIENT_BLACKLISTED",
     ["recipient wallet", "blacklisted", "Blacklistable: account is blacklisted"]),
    ("blacklisted treasury", "USDT", "blacklist_treasury", "ERR_FUNDING_WALLET_BLACKLISTED",
     ["funding wallet", "blacklisted", "the token gave no reason"]),
    ("paused USDC", "USDC", "pause", "ERR_TOKEN_PAUSED", ["USDC is paused", "Pausable: paused"]),
    ("paused USDT", "USDT", "pause", "ERR_TOKEN_PAUSED", ["USDT is paused", "the token gave no reason"]),
    ("USDC balance", "USDC", "drain", "ERR_INSUFFICIENT_BALANCE",
     ["holds 0.000000 USDC", "less than the 125.000000 USDC", "ERC20: transfer amount exceeds balance"]),
    ("USDT balance", "USDT", "drain", "ERR_INSUFFICIENT_BALANCE",
     ["holds 0.000000 USDT", "less than the 125.000000 USDT"]),
    ("USDT fee", "USDT", "fee", "ERR_TOKEN_TRANSFER_FEE",
     ["takes a fee on transfers", "would receive 124.875000 USDT", "paid in full or not at all"]),
]


@pytest.mark.parametrize(("token", "switch", "code", "words"), [c[1:] for c in CAUSES],
                         ids=[c[0] for c in CAUSES])
async def test_a_failed_charge_names_its_cause(pay_api, real_chain, database_url, token,  # noqa: F811
                                               switch, code, words):
    chain: RealTokenChain = real_chain
    treasury, who, intent, approval = await confirmed(pay_api, chain, database_url, token)
    spender = intent["approval_calldata"]["spender"]
    if switch == "blacklist_recipient":
        chain.blacklist(token, who.wallet)
    elif switch == "blacklist_treasury":
        chain.blacklist(token, treasury)
    elif switch == "pause":
        chain.pause(token)
    elif switch == "drain":
        chain.transfer(token, treasury.lower(), Account.create().address, balance(chain, token, treasury))
    else:
        chain.set_tether_fee(10, 5)  # 0.1%, at most 5 USDT: 0.125 USDT on this loan
    before = (balance(chain, token, treasury), balance(chain, token, who.wallet),
              allowance(chain, token, treasury, spender))

    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval})
    assert resp.status == 201, await resp.text()
    charge = (await resp.json())["charge"]
    assert (charge["status"], charge["failure_code"]) == ("failed", code)
    assert charge["disbursement_tx_hash"] is None
    for word in [*words, "nothing was sent"]:
        assert word in charge["failure_message"], (word, charge["failure_message"])
    assert await failed_event(pay_api, charge["id"]) == charge  # charge.failed says the same
    after = (balance(chain, token, treasury), balance(chain, token, who.wallet),
             allowance(chain, token, treasury, spender))
    assert after == before  # nothing moved, the allowance is untouched


async def test_a_charge_mined_and_reverted_by_a_pause_says_so(pay_api, real_chain, database_url):  # noqa: F811
    """The pause lands in the same block as the disbursement, ahead of it: the transaction reverts on
    chain, and the failure names the pause and the transaction."""
    chain: RealTokenChain = real_chain
    _, who, intent, approval = await confirmed(pay_api, chain, database_url, "USDC")
    chain.set_automine(False)
    try:
        resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                        "approval_tx_hash": approval})
        charge_id = (await resp.json())["charge"]["id"]
        await wait_broadcast(pay_api, charge_id)
        chain.node.call("eth_sendTransaction", [{  # a higher tip: ordered first in the block
            "from": chain._issuer("USDC"), "to": chain.tokens["USDC"], "data": "0x8456cb59",  # pause()
            "gas": hex(200_000), "maxPriorityFeePerGas": hex(100 * 10**9), "maxFeePerGas": hex(300 * 10**9)}])
        chain.mine(1)
    finally:
        chain.set_automine(True)
    charge = await wait_charge_settled(pay_api, charge_id)
    assert (charge["status"], charge["failure_code"]) == ("failed", "ERR_TOKEN_PAUSED")
    receipt = chain.node.call("eth_getTransactionReceipt", [charge["disbursement_tx_hash"]])
    assert receipt["status"] == "0x0"
    mined_in = int(receipt["blockNumber"], 16)
    reverted = f"transaction {charge['disbursement_tx_hash']} reverted in block {mined_in}"
    assert reverted in charge["failure_message"]
    assert "Pausable: paused" in charge["failure_message"]
    assert balance(chain, "USDC", who.wallet) == 0


async def wait_broadcast(api: ApiHarness, charge_id: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        async with api.engine.connect() as conn:
            status = await conn.scalar(select(disbursement_transactions.c.status).where(
                disbursement_transactions.c.charge_id == charge_id))
        if status == "broadcast":
            return
        assert time.monotonic() < deadline, f"charge {charge_id} not broadcast: {status}"
        await asyncio.sleep(0.05)


async def test_usdc_proxy_upgraded_under_a_confirmed_intent(pay_api, real_chain, database_url):  # noqa: F811
    """Circle upgrades USDC's implementation (the proxy's admin points it at a new FiatTokenV2_2): the
    token's address, balances and allowances stay, the confirmed intent is paid, and the next intent's
    approval, emitted by the proxy on the new implementation, is indexed and pays too."""
    chain: RealTokenChain = real_chain
    treasury, who, intent, approval = await confirmed(pay_api, chain, database_url, "USDC")
    spender = intent["approval_calldata"]["spender"]
    before = (balance(chain, "USDC", treasury), allowance(chain, "USDC", treasury, spender))
    old = chain.proxy_implementation()
    new = chain.deploy_usdc_implementation()
    chain.upgrade_usdc(new)
    assert chain.proxy_implementation() == new != old
    assert (balance(chain, "USDC", treasury), allowance(chain, "USDC", treasury, spender)) == before

    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval})
    assert resp.status == 201 and (await resp.json())["charge"]["status"] == "succeeded", await resp.text()
    assert balance(chain, "USDC", who.wallet) == LOAN
    following = await create_intent(pay_api, who, treasury, "7", "USDC")
    next_approval = approve(chain, following, treasury)
    async with daemon(pay_api.settings, database_url):
        await wait_intent_status(pay_api, following["id"], "approval_confirmed")
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": following["id"],
                                                    "approval_tx_hash": next_approval})
    assert (await resp.json())["charge"]["status"] == "succeeded"
    assert balance(chain, "USDC", who.wallet) == LOAN + 7 * USD


async def test_tether_takes_no_fee_and_refuses_approve_over_a_non_zero_allowance(
        pay_api, real_chain, database_url):  # noqa: F811
    """As on mainnet today: Tether's fee is zero, so a USDT loan arrives whole; and its approve(n) over a
    non-zero allowance reverts, which is why a second USDT intent's instructions begin with approve(0)."""
    chain: RealTokenChain = real_chain
    assert chain.read("USDT", "basisPointsRate()", [], [], "uint256") == 0
    assert chain.read("USDT", "maximumFee()", [], [], "uint256") == 0
    treasury, who, intent, approval = await confirmed(pay_api, chain, database_url, "USDT")
    spender = intent["approval_calldata"]["spender"]
    refused = chain.approve("USDT", treasury.lower(), spender, 1)
    assert chain.receipt(refused)["status"] == "0x0"
    second = await create_intent(pay_api, who, treasury, "3", "USDT")
    assert second["approval_calldata"]["reset_calldata"]["amount"] == "0"
    assert second["approval_calldata"]["amount"] == str(LOAN + 3 * USD)  # the first is still open
    resp = await post_json(pay_api, "/v1/charges", {"payment_intent_id": intent["id"],
                                                    "approval_tx_hash": approval})
    assert (await resp.json())["charge"]["status"] == "succeeded"
    assert balance(chain, "USDT", who.wallet) == LOAN
