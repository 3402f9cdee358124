"""Pure rules behind the allowance ledger and the failure reasons: what an allowance can still cover, the
Disbursement contract's reverts decoded (the token's own reason kept inside), each cause turned into its
failure code and message; and sign-in domains parsed. No chain, no database."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from vip.chain.reverts import decode_revert
from vip.chain.token_reads import TokenState
from vip.connections.sign_in_domains import parse_domain, parse_prefixes
from vip.errors import ValidationFailed
from vip.payments import failures
from vip.payments.rules import unspent

TOKEN = "0x" + "ab" * 20
TREASURY = "0x" + "11" * 20
BORROWER = "0x" + "22" * 20
SPENDER = "0x" + "33" * 20
PULL = failures.Pull("USDC", 6, TREASURY, BORROWER, SPENDER, 250_000_000)


def selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def token_reverted(reason: bytes) -> str:
    data = selector("TokenReverted(address,bytes)") + encode(["address", "bytes"], [TOKEN, reason])
    return "0x" + data.hex()


def error_string(text: str) -> bytes:
    return selector("Error(string)") + encode(["string"], [text])


def state(**changes) -> TokenState:
    values = {"paused": False, "owner_blacklisted": False, "recipient_blacklisted": False,
              "balance": 10**12, "allowance": 10**12}
    return TokenState(**{**values, **changes})


# --- the ledger's arithmetic --------------------------------------------------------------------------------

def test_an_allowance_spent_by_a_charge_not_final_yet_covers_nothing_more():
    # The case: 1,000 approved and final, charged above the final block; 250 approved, not final.
    assert unspent(approved_final=1000, approved_now=250, reserved=0, consumed_unfinal=1000) == 0
    # Once the new approval is final (and the charge too): exactly the 250.
    assert unspent(approved_final=250, approved_now=250, reserved=0, consumed_unfinal=0) == 250


def test_a_raise_counts_once_final_and_a_lowering_at_once():
    assert unspent(approved_final=100, approved_now=900, reserved=0, consumed_unfinal=0) == 100
    assert unspent(approved_final=900, approved_now=0, reserved=0, consumed_unfinal=0) == 0  # revoked / reset
    assert unspent(approved_final=900, approved_now=900, reserved=600, consumed_unfinal=0) == 300


@given(st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**12), st.integers(0, 10**12))
def test_unspent_never_exceeds_what_either_view_leaves(final, now, reserved, consumed):
    left = unspent(final, now, reserved, consumed)
    assert 0 <= left <= max(0, final - reserved - consumed) and left <= max(0, now - reserved)


# --- reverts decoded ----------------------------------------------------------------------------------------

def test_the_tokens_own_reason_is_read_out_of_the_contracts_error():
    revert = decode_revert(token_reverted(error_string("Blacklistable: account is blacklisted")))
    assert (revert.error, revert.token) == ("TokenReverted", TOKEN)
    assert revert.token_reason is not None
    assert revert.token_reason.text == "Blacklistable: account is blacklisted"
    empty = decode_revert(token_reverted(b""))  # USDT's bare require
    assert empty.token_reason is not None and empty.token_reason.text is None
    custom = decode_revert(token_reverted(selector("InsufficientAllowance()")))  # our test token's error
    assert custom.token_reason is not None and custom.token_reason.text == "InsufficientAllowance()"


def test_the_contracts_other_errors_are_named():
    paid = "0x" + (selector("AlreadyDisbursed(bytes32)") + b"\x01" * 32).hex()
    assert decode_revert(paid).error == "AlreadyDisbursed"
    short = "0x" + (selector("TokenShortDelivery(address,uint256,uint256)")
                    + encode(["address", "uint256", "uint256"], [TOKEN, 100, 99])).hex()
    assert decode_revert(short).delivered == (100, 99)
    assert decode_revert(None).error == "" and decode_revert("0x").error == ""
    assert decode_revert("0xdeadbeef").error == "unknown"
    truncated = "0x" + (selector("TokenReverted(address,bytes)") + b"\x00" * 5).hex()
    assert decode_revert(truncated).error == "unknown"


# --- causes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reason", "token_state", "code"), [
    (error_string("Blacklistable: account is blacklisted"), state(recipient_blacklisted=True),
     failures.RECIPIENT_BLACKLISTED),
    (error_string("Blacklistable: account is blacklisted"), state(owner_blacklisted=True),
     failures.FUNDING_WALLET_BLACKLISTED),
    (error_string("Pausable: paused"), None, failures.TOKEN_PAUSED),
    (error_string("ERC20: transfer amount exceeds balance"), state(balance=1), failures.INSUFFICIENT_BALANCE),
    (error_string("ERC20: transfer amount exceeds allowance"), None, failures.INSUFFICIENT_ALLOWANCE),
    (selector("InsufficientBalance()"), None, failures.INSUFFICIENT_BALANCE),
    # A token that gives no reason (USDT): the state at the same block names the cause.
    (b"", state(paused=True), failures.TOKEN_PAUSED),
    (b"", state(owner_blacklisted=True), failures.FUNDING_WALLET_BLACKLISTED),
    (b"", state(balance=5), failures.INSUFFICIENT_BALANCE),
    (b"", state(allowance=5), failures.INSUFFICIENT_ALLOWANCE),
    # USDT checks only the sender: a blacklisted recipient explains a failure only when nothing else does.
    (b"", state(recipient_blacklisted=True, balance=5), failures.INSUFFICIENT_BALANCE),
    (b"", state(recipient_blacklisted=True), failures.RECIPIENT_BLACKLISTED),
    (b"", state(), failures.REJECTED),
    (b"", None, failures.REJECTED),
])
def test_each_cause_has_its_code(reason, token_state, code):
    failure = failures.explain(decode_revert(token_reverted(reason)), token_state, PULL, failures.Sending())
    assert failure.code == code
    assert "nothing was sent" in failure.message and len(failure.message) <= failures.MAX_MESSAGE_CHARS


def test_a_mined_revert_names_its_transaction_and_an_unknown_one_stays_generic():
    sent = failures.Sending("0x" + "cd" * 32, 1234)
    failure = failures.explain(decode_revert(token_reverted(b"")), state(paused=True), PULL, sent)
    assert failure.code == failures.TOKEN_PAUSED
    assert f"transaction {sent.tx_hash} reverted in block 1234; nothing moved" in failure.message
    other = failures.explain(decode_revert("0xdeadbeef"), state(), PULL, sent)
    assert other.code == failures.REVERTED


def test_messages_say_what_to_do_in_token_units():
    balance = failures.explain(decode_revert(token_reverted(b"")), state(balance=12_500_000), PULL,
                               failures.Sending())
    assert "holds 12.500000 USDC, less than the 250.000000 USDC to pay: fund it" in balance.message
    assert "0x1111111111111111111111111111111111111111" in balance.message  # checksummed address
    allowance = failures.explain(decode_revert(token_reverted(error_string(
        "ERC20: transfer amount exceeds allowance"))), state(allowance=0), PULL, failures.Sending())
    assert "allowance to the spender" in allowance.message and "approve again" in allowance.message
    assert "'ERC20: transfer amount exceeds allowance'" in allowance.message


# --- sign-in domains ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["App.Lender.Example", "localhost:3000", "127.0.0.1:8080", "a.b-c.example"])
def test_domains_are_hosts_with_an_optional_port(value):
    assert parse_domain(value) == value.lower()


@pytest.mark.parametrize("value", ["", "https://a.example", "a.example/", "a..example", "-a.example",
                                   "a.example:0", "a.example:65536", "u@a.example", "a b.example",
                                   "x" * 64 + ".example"])
def test_anything_else_is_no_domain(value):
    with pytest.raises(ValidationFailed):
        parse_domain(value)


def test_uri_prefixes_are_https_on_the_domain_or_http_on_loopback():
    assert parse_prefixes("app.lender.example", []) == ("https://app.lender.example/",)
    assert parse_prefixes("localhost:3000", None) == ("http://localhost:3000/",)
    given = ["HTTPS://App.Lender.Example/connect", "https://app.lender.example"]
    assert parse_prefixes("app.lender.example", given) == ("https://app.lender.example/connect",
                                                           "https://app.lender.example/")
    for bad in ("http://app.lender.example/", "https://evil.example/", "https://app.lender.example/#x"):
        with pytest.raises(ValidationFailed):
            parse_prefixes("app.lender.example", [bad])
