"""Behaviour of the Solidity contracts on a real Anvil node, and freshness of the committed artifacts."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import pytest
from eth_account import Account
from eth_utils import keccak
from web3 import Web3
from web3.contract import Contract
from web3.logs import DISCARD

from tests.support.paths import REPO_ROOT
from vip.chain.contracts import (
    APPROVAL_TOPIC,
    DISBURSED_TOPIC,
    TRANSFER_TOPIC,
    TransactionReverted,
    contract_at,
    organisation_key,
    send_transaction,
    spender_of,
)
from vip.devstack.anvil import AnvilNode
from vip.devstack.deploy import LocalContracts, deploy_local_contracts, mint

TOKEN_NAMES = {"usdc": "StandardStablecoin", "usdt": "TetherStyleStablecoin"}
TREASURY_FUNDS = 1_000_000 * 10**6  # 1M tokens in 6-decimal base units
LOAN = 2_500 * 10**6 + 1  # an odd amount so an off-by-one would show
ORG, OTHER_ORG = "org_lender_a", "org_lender_b"


@dataclass(frozen=True)
class Env:
    w3: Web3
    addresses: LocalContracts
    deployer_key: str
    operator_key: str
    minter_key: str
    treasury_key: str
    stranger_key: str

    @property
    def treasury(self) -> str:
        return Account.from_key(self.treasury_key).address

    def token(self, symbol: str) -> Contract:
        return contract_at(self.w3, TOKEN_NAMES[symbol], getattr(self.addresses, symbol))

    @property
    def disbursement(self) -> Contract:
        return contract_at(self.w3, "Disbursement", self.addresses.disbursement)

    def spender(self, organisation_id: str = ORG) -> str:
        return spender_of(self.addresses.disbursement, organisation_id)


@pytest.fixture
def env(anvil: AnvilNode, w3: Web3) -> Env:
    """Fresh contracts per test (the chain is shared); the treasury holds funds of both tokens."""
    # Only keys that hold gas money: a mistyped key in the dev key list must not break these tests.
    funded = [k for k in anvil.private_keys if w3.eth.get_balance(Account.from_key(k).address) > 0]
    deployer, operator, minter, treasury, stranger = funded[:5]
    addresses = deploy_local_contracts(
        w3, deployer, Account.from_key(operator).address, Account.from_key(minter).address
    )
    env = Env(w3, addresses, deployer, operator, minter, treasury, stranger)
    for symbol in TOKEN_NAMES:
        mint(w3, getattr(addresses, symbol), env.treasury, TREASURY_FUNDS, minter)
    return env


def new_address() -> str:
    return Account.create().address


def intent_id() -> bytes:
    return os.urandom(32)


def approve_disbursement(env: Env, symbol: str, amount: int, organisation_id: str = ORG) -> None:
    """The treasury approves the organisation's spender (never the Disbursement contract itself)."""
    token = env.token(symbol)
    send_transaction(env.w3, token.functions.approve(env.spender(organisation_id), amount), env.treasury_key)


def disburse_call(env: Env, intent: bytes, symbol: str, to: str, amount: int, organisation_id: str = ORG):
    token_address = getattr(env.addresses, symbol)
    return env.disbursement.functions.disburse(organisation_key(organisation_id), intent, token_address,
                                               env.treasury, to, amount)


def send_without_estimate(env: Env, call, private_key: str):
    """Send with a fixed gas limit so a reverting call is mined rather than refused at estimation."""
    sender = Account.from_key(private_key).address
    return send_transaction(env.w3, call.build_transaction({"from": sender, "gas": 300_000}), private_key)


def balances(env: Env, symbol: str, *holders: str) -> list[int]:
    token = env.token(symbol)
    return [token.functions.balanceOf(h).call() for h in holders]


# --- tokens -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_token_metadata_and_minting_only_by_minter(env: Env, symbol: str) -> None:
    token = env.token(symbol)
    assert token.functions.decimals().call() == 6
    assert token.functions.symbol().call() == symbol.upper()
    assert token.functions.name().call() == {"usdc": "USD Coin", "usdt": "Tether USD"}[symbol]
    assert token.functions.balanceOf(env.treasury).call() == TREASURY_FUNDS
    assert token.functions.totalSupply().call() == TREASURY_FUNDS

    holder = new_address()
    receipt = mint(env.w3, token.address, holder, 7, env.minter_key)
    (log,) = receipt["logs"]
    assert log["topics"][0].to_0x_hex() == TRANSFER_TOPIC
    assert token.events.Transfer().process_log(log)["args"] == {
        "from": "0x" + "00" * 20,
        "to": holder,
        "value": 7,
    }

    with pytest.raises(TransactionReverted, match="NotMinter"):
        mint(env.w3, token.address, holder, 7, env.stranger_key)
    with pytest.raises(ValueError):
        mint(env.w3, token.address, holder, 7.0, env.minter_key)  # type: ignore[arg-type]
    assert token.functions.balanceOf(holder).call() == 7


def test_standard_token_returns_true(env: Env) -> None:
    token = env.token("usdc")
    holder = new_address()
    for call in (token.functions.transfer(holder, 1), token.functions.approve(holder, 1)):
        assert call.call({"from": env.treasury}) is True
    raw = env.w3.eth.call(
        {"from": env.treasury, "to": token.address, "data": token.encode_abi("transfer", [holder, 1])}
    )
    assert int.from_bytes(raw, "big") == 1 and len(raw) == 32


def test_standard_transfer_from_emits_no_approval(env: Env) -> None:
    token, spender_key = env.token("usdc"), env.stranger_key
    spender = Account.from_key(spender_key).address
    send_transaction(env.w3, token.functions.approve(spender, 10), env.treasury_key)
    receipt = send_transaction(env.w3, token.functions.transferFrom(env.treasury, spender, 4), spender_key)
    topics = [log["topics"][0].to_0x_hex() for log in receipt["logs"]]
    assert topics == [TRANSFER_TOPIC] and APPROVAL_TOPIC not in topics
    assert token.functions.allowance(env.treasury, spender).call() == 6


def test_tether_style_approve_requires_reset_and_returns_nothing(env: Env) -> None:
    token, w3 = env.token("usdt"), env.w3
    spender = new_address()
    receipt = send_transaction(w3, token.functions.approve(spender, 5), env.treasury_key)
    assert receipt["logs"][0]["topics"][0].to_0x_hex() == APPROVAL_TOPIC

    with pytest.raises(TransactionReverted, match="ApproveFromNonZero"):
        send_transaction(w3, token.functions.approve(spender, 9), env.treasury_key)
    assert token.functions.allowance(env.treasury, spender).call() == 5
    send_transaction(w3, token.functions.approve(spender, 0), env.treasury_key)
    send_transaction(w3, token.functions.approve(spender, 9), env.treasury_key)
    assert token.functions.allowance(env.treasury, spender).call() == 9

    for fn, args in (("transfer", [spender, 1]), ("approve", [spender, 0])):
        raw = w3.eth.call({"from": env.treasury, "to": token.address, "data": token.encode_abi(fn, args)})
        assert raw == b"", f"{fn} returned {raw!r}"


# --- disbursement -----------------------------------------------------------------------------------


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_disburse_moves_exact_amount_and_emits_event(env: Env, symbol: str) -> None:
    borrower, intent = new_address(), intent_id()
    approve_disbursement(env, symbol, LOAN)
    receipt = send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)

    assert balances(env, symbol, env.treasury, borrower, env.addresses.disbursement, env.spender()) == [
        TREASURY_FUNDS - LOAN,
        LOAN,
        0,
        0,
    ]
    assert env.token(symbol).functions.allowance(env.treasury, env.spender()).call() == 0
    assert env.disbursement.functions.disbursed(intent).call() is True

    # DISCARD: the receipt also holds the token's Transfer log, which is not a Disbursement event.
    (event,) = env.disbursement.events.Disbursed().process_receipt(receipt, errors=DISCARD)
    assert event["address"] == env.addresses.disbursement
    assert event["args"] == {
        "intentId": intent,
        "token": getattr(env.addresses, symbol),
        "from": env.treasury,
        "to": borrower,
        "amount": LOAN,
    }
    # The organisation's first disbursement creates its spender, at the address treasuries approved.
    (created,) = env.disbursement.events.SpenderCreated().process_receipt(receipt, errors=DISCARD)
    assert created["args"] == {"organisation": bytes.fromhex(organisation_key(ORG)[2:]),
                               "spender": env.spender()}
    created_topic = "0x" + keccak(text="SpenderCreated(bytes32,address)").hex()
    topics = [log["topics"][0].to_0x_hex() for log in receipt["logs"]]
    assert sorted(topics) == sorted([DISBURSED_TOPIC, TRANSFER_TOPIC, created_topic])


def test_spender_address_is_computed_off_chain_and_created_once(env: Env) -> None:
    d = env.disbursement
    for org in (ORG, OTHER_ORG):
        assert d.functions.spenderOf(organisation_key(org)).call() == env.spender(org)
    assert env.spender(ORG) != env.spender(OTHER_ORG)
    assert env.w3.eth.get_code(env.spender()) == b""  # approvable before it exists
    approve_disbursement(env, "usdc", 2 * LOAN)
    first = send_transaction(env.w3, disburse_call(env, intent_id(), "usdc", new_address(), LOAN),
                             env.operator_key)
    second = send_transaction(env.w3, disburse_call(env, intent_id(), "usdc", new_address(), LOAN),
                              env.operator_key)
    assert len(d.events.SpenderCreated().process_receipt(first, errors=DISCARD)) == 1
    assert d.events.SpenderCreated().process_receipt(second, errors=DISCARD) == ()
    spender = contract_at(env.w3, "OrganisationSpender", env.spender())
    assert spender.functions.disbursement().call() == env.addresses.disbursement
    assert balances(env, "usdc", env.treasury) == [TREASURY_FUNDS - 2 * LOAN]


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_an_approval_for_one_organisation_never_pays_another(env: Env, symbol: str) -> None:
    """The treasury of OTHER_ORG approved its own spender; the operator's key naming ORG (whose intent
    named that treasury) cannot move a unit of it, estimated or mined."""
    borrower, intent = new_address(), intent_id()
    approve_disbursement(env, symbol, 10 * LOAN, organisation_id=OTHER_ORG)
    call = disburse_call(env, intent, symbol, borrower, LOAN, organisation_id=ORG)
    with pytest.raises(TransactionReverted, match="TokenReverted"):
        send_transaction(env.w3, call, env.operator_key)
    with pytest.raises(TransactionReverted, match="reverted in block"):
        send_without_estimate(env, call, env.operator_key)
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS, 0]
    assert env.disbursement.functions.disbursed(intent).call() is False
    # Not even by calling a spender directly: only its Disbursement contract may pull through it.
    send_transaction(env.w3, disburse_call(env, intent_id(), symbol, new_address(), 1, OTHER_ORG),
                     env.operator_key)  # creates OTHER_ORG's spender
    spender = contract_at(env.w3, "OrganisationSpender", env.spender(OTHER_ORG))
    token_address = getattr(env.addresses, symbol)
    for key in (env.operator_key, env.deployer_key, env.stranger_key):
        with pytest.raises(TransactionReverted, match="NotDisbursement"):
            send_transaction(env.w3, spender.functions.pull(token_address, env.treasury, borrower, LOAN), key)
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS - 1, 0]
    # The treasury's own organisation is paid as approved.
    send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN, OTHER_ORG), env.operator_key)
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS - 1 - LOAN, LOAN]


def test_only_operator_may_disburse(env: Env) -> None:
    borrower = new_address()
    approve_disbursement(env, "usdc", LOAN)
    for key in (env.stranger_key, env.deployer_key, env.treasury_key):
        with pytest.raises(TransactionReverted, match="NotOperator"):
            send_transaction(env.w3, disburse_call(env, intent_id(), "usdc", borrower, LOAN), key)
    assert balances(env, "usdc", env.treasury, borrower) == [TREASURY_FUNDS, 0]


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_replayed_intent_is_refused_and_moves_nothing(env: Env, symbol: str) -> None:
    borrower, intent = new_address(), intent_id()
    approve_disbursement(env, symbol, 3 * LOAN)
    send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)

    with pytest.raises(TransactionReverted, match="AlreadyDisbursed"):
        send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)
    # The same replay mined on chain: it reverts and leaves balances and allowance alone.
    with pytest.raises(TransactionReverted, match="reverted in block") as info:
        send_without_estimate(env, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)
    assert info.value.receipt["status"] == 0 and info.value.receipt["logs"] == []
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS - LOAN, LOAN]
    allowance = env.token(symbol).functions.allowance(env.treasury, env.spender()).call()
    assert allowance == 2 * LOAN


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_insufficient_allowance_reverts_and_moves_nothing(env: Env, symbol: str) -> None:
    borrower, intent = new_address(), intent_id()
    approve_disbursement(env, symbol, LOAN - 1)
    with pytest.raises(TransactionReverted, match="TokenReverted"):
        send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)
    with pytest.raises(TransactionReverted, match="reverted in block"):
        send_without_estimate(env, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS, 0]
    # The failed attempt must not burn the intent id: a retry after a proper approval succeeds.
    assert env.disbursement.functions.disbursed(intent).call() is False
    token = env.token(symbol)
    send_transaction(env.w3, token.functions.approve(env.spender(), 0), env.treasury_key)
    approve_disbursement(env, symbol, LOAN)
    send_transaction(env.w3, disburse_call(env, intent, symbol, borrower, LOAN), env.operator_key)
    assert balances(env, symbol, env.treasury, borrower) == [TREASURY_FUNDS - LOAN, LOAN]


def test_invalid_arguments_and_codeless_token_are_refused(env: Env) -> None:
    borrower, zero = new_address(), "0x" + "00" * 20
    approve_disbursement(env, "usdc", LOAN)
    d, usdc, treasury, org = env.disbursement, env.addresses.usdc, env.treasury, organisation_key(ORG)
    for call in (
        d.functions.disburse(org, intent_id(), usdc, treasury, borrower, 0),
        d.functions.disburse(org, intent_id(), usdc, treasury, zero, LOAN),
        d.functions.disburse(org, intent_id(), usdc, zero, borrower, LOAN),
        d.functions.disburse(org, intent_id(), zero, treasury, borrower, LOAN),
    ):
        with pytest.raises(TransactionReverted, match="InvalidArgument"):
            send_transaction(env.w3, call, env.operator_key)
    # An address without code would make a low-level call "succeed" without moving anything.
    with pytest.raises(TransactionReverted, match="TokenHasNoCode"):
        send_transaction(
            env.w3,
            d.functions.disburse(org, intent_id(), new_address(), treasury, borrower, LOAN),
            env.operator_key,
        )
    assert balances(env, "usdc", treasury, borrower) == [TREASURY_FUNDS, 0]


def test_owner_controls_operator_and_ownership(env: Env) -> None:
    d, w3 = env.disbursement, env.w3
    old_operator = Account.from_key(env.operator_key).address
    new_operator = Account.from_key(env.stranger_key).address
    deployer = Account.from_key(env.deployer_key).address
    assert (d.functions.owner().call(), d.functions.operator().call()) == (deployer, old_operator)

    for key in (env.operator_key, env.stranger_key):
        with pytest.raises(TransactionReverted, match="NotOwner"):
            send_transaction(w3, d.functions.setOperator(new_operator), key)
    receipt = send_transaction(w3, d.functions.setOperator(new_operator), env.deployer_key)
    (event,) = d.events.OperatorChanged().process_receipt(receipt)
    assert event["args"] == {"previous": old_operator, "current": new_operator}

    borrower = new_address()
    approve_disbursement(env, "usdc", LOAN)
    with pytest.raises(TransactionReverted, match="NotOperator"):
        send_transaction(w3, disburse_call(env, intent_id(), "usdc", borrower, LOAN), env.operator_key)
    send_transaction(w3, disburse_call(env, intent_id(), "usdc", borrower, LOAN), env.stranger_key)
    assert balances(env, "usdc", borrower) == [LOAN]

    new_owner = Account.from_key(env.treasury_key).address
    with pytest.raises(TransactionReverted, match="NotOwner"):
        send_transaction(w3, d.functions.transferOwnership(new_owner), env.stranger_key)
    receipt = send_transaction(w3, d.functions.transferOwnership(new_owner), env.deployer_key)
    (event,) = d.events.OwnershipTransferred().process_receipt(receipt)
    assert event["args"] == {"previousOwner": deployer, "newOwner": new_owner}
    with pytest.raises(TransactionReverted, match="NotOwner"):
        send_transaction(w3, d.functions.setOperator(deployer), env.deployer_key)


# --- sprayer ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("symbol", ["usdc", "usdt"])
def test_sprayer_makes_one_transfer_log_per_recipient(env: Env, symbol: str) -> None:
    n, amount = 120, 3
    recipients = [new_address() for _ in range(n)]
    token = env.token(symbol)
    send_transaction(env.w3, token.functions.approve(env.addresses.sprayer, n * amount), env.treasury_key)
    sprayer = contract_at(env.w3, "TransferSprayer", env.addresses.sprayer)
    receipt = send_transaction(
        env.w3, sprayer.functions.spray(token.address, recipients, amount), env.treasury_key
    )

    transfers = [token.events.Transfer().process_log(log)["args"] for log in receipt["logs"]]
    assert all(log["topics"][0].to_0x_hex() == TRANSFER_TOPIC for log in receipt["logs"])
    assert transfers == [{"from": env.treasury, "to": r, "value": amount} for r in recipients]
    assert balances(env, symbol, env.treasury) == [TREASURY_FUNDS - n * amount]


# --- artifacts --------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_committed_artifacts_match_sources() -> None:
    node = shutil.which("node")
    assert node, "node is required to check the contract artifacts"
    result = subprocess.run(
        [node, "contracts/build.mjs", "--check"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
