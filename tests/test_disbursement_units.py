"""Pure rules of disbursement: base units, intent ids, allowance reservation, EIP-1559 fees; the
operator key from config, never printed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from eth_account import Account
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from vip.chain.contracts import spender_of
from vip.chain.fees import Fees, bumped, fees_for
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.config import DisbursementConfig, load_settings
from vip.errors import ApiError, Unprocessable
from vip.payments.rules import (
    Reservation,
    chain_intent_id,
    check_chargeable,
    check_funding_wallet,
    confirmable,
    of_organisation,
    usd_to_base_units,
)


def test_usd_to_base_units_is_exact():
    assert usd_to_base_units(Decimal("250.5"), 6) == 250_500_000
    assert usd_to_base_units(Decimal("0.000001"), 6) == 1
    assert usd_to_base_units(Decimal("1000000"), 6) == 10**12
    with pytest.raises(ValueError):
        usd_to_base_units(Decimal("0.0000001"), 6)


def test_chain_intent_id_is_stable_and_distinct():
    assert chain_intent_id("pi_a") == chain_intent_id("pi_a")
    assert chain_intent_id("pi_a") != chain_intent_id("pi_b")
    assert len(chain_intent_id("pi_a")) == 66


def test_allowance_confirms_oldest_first_and_skips_what_does_not_fit():
    waiting = [Reservation("a", 100), Reservation("b", 100), Reservation("c", 30)]
    assert confirmable(150, 0, waiting) == ["a", "c"]
    assert confirmable(250, 0, waiting) == ["a", "b", "c"]
    assert confirmable(250, 200, waiting) == ["c"]
    assert confirmable(99, 0, waiting) == ["c"]
    assert confirmable(0, 0, waiting) == []


def test_an_approval_confirms_only_its_organisations_intents():
    contract = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
    def spender(org: str) -> str:
        return spender_of(contract, org)
    assert spender("org_a") != spender("org_b") and spender("org_a") != contract
    waiting = [Reservation("a1", 25, "org_a"), Reservation("b1", 25, "org_b"), Reservation("a2", 5, "org_a")]
    assert [r.intent_id for r in of_organisation(waiting, spender("org_b").lower(), spender)] == ["b1"]
    assert [r.intent_id for r in of_organisation(waiting, spender("org_a"), spender)] == ["a1", "a2"]
    assert of_organisation(waiting, contract, spender) == []  # the shared contract confirms no one


def test_an_intent_names_only_its_own_organisations_funding_wallet():
    class Registration:
        def __init__(self, organisation_id: str, kind: str = "eoa", network: str = "base") -> None:
            self.organisation_id, self.kind, self.network = organisation_id, kind, network

    check_funding_wallet(Registration("org_a"), "org_a", "polygon", "0xW")  # a key signs on every chain
    check_funding_wallet(Registration("org_a", "contract"), "org_a", "base", "0xW")
    for registration, network in ((None, "base"), (Registration("org_b"), "base"),
                                  (Registration("org_a", "contract"), "polygon")):
        with pytest.raises(Unprocessable) as refused:
            check_funding_wallet(registration, "org_a", network, "0xW")
        assert refused.value.code == "ERR_FUNDING_WALLET_NOT_REGISTERED"


@given(st.integers(0, 10**9), st.integers(0, 10**9),
       st.lists(st.integers(0, 10**8), max_size=20))
def test_confirmed_intents_never_exceed_the_allowance(allowance, reserved, amounts):
    waiting = [Reservation(str(i), a) for i, a in enumerate(amounts)]
    chosen = set(confirmable(allowance, reserved, waiting))
    assert sum(a for i, a in enumerate(amounts) if str(i) in chosen) <= max(0, allowance - reserved)


def test_fees_and_replacement_bumps():
    assert fees_for(10, 2, 10**12) == Fees(22, 2)
    assert fees_for(10, 2, 15) == Fees(15, 2)
    assert fees_for(10, 20, 15) == Fees(15, 15)
    assert fees_for(10, 2, 10**12, min_tip=30) == Fees(50, 30)  # polygon's floor lifts a low market tip
    assert fees_for(10, 40, 10**12, min_tip=30) == Fees(60, 40)
    previous = Fees(100, 10)
    assert bumped(previous, Fees(50, 5), 25, 10**12) == Fees(125, 13)  # at least 25% up, rounded up
    assert bumped(previous, Fees(300, 30), 25, 10**12) == Fees(300, 30)  # the market moved further
    assert bumped(previous, Fees(50, 5), 25, 110) == Fees(110, 13)


@given(st.integers(1, 10**12), st.integers(0, 10**11), st.integers(10, 100))
def test_a_replacement_always_pays_at_least_ten_percent_more(max_fee, tip, percent):
    previous = Fees(max_fee, min(tip, max_fee))
    new = bumped(previous, Fees(0, 0), percent, 10**15)
    assert new.max_fee_per_gas * 10 >= previous.max_fee_per_gas * 11
    assert new.max_priority_fee_per_gas * 10 >= previous.max_priority_fee_per_gas * 11
    assert new.max_priority_fee_per_gas <= new.max_fee_per_gas


def test_operator_key_from_the_environment_is_secret(tmp_path):
    account = Account.create()
    settings = load_settings(environ={"VIP_OPERATOR_KEY": account.key.hex()})
    assert load_operator(settings.disbursement).address == account.address
    assert account.key.hex() not in repr(settings) and account.key.hex() not in str(settings.model_dump())


def test_operator_key_from_a_keystore_file(tmp_path):
    account = Account.create()
    keystore = tmp_path / "operator.json"
    keystore.write_text(json.dumps(Account.encrypt(account.key, "s3cret", iterations=2)))
    config = DisbursementConfig(operator_keystore=str(keystore),
                                operator_keystore_password=SecretStr("s3cret"))
    assert load_operator(config).address == account.address
    with pytest.raises(OperatorKeyMissing):
        load_operator(DisbursementConfig(operator_keystore=str(keystore)))
    with pytest.raises(OperatorKeyMissing):
        load_operator(DisbursementConfig())
    with pytest.raises(ValueError):
        load_operator(DisbursementConfig(operator_keystore=str(keystore),
                                         operator_keystore_password=SecretStr("wrong")))


def test_an_intent_past_expiry_with_an_approval_in_time_waits_instead_of_expiring():
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    late = SimpleNamespace(id="pi_1", status="pending_approval", expires_at=now - timedelta(seconds=1))
    with pytest.raises(ApiError) as expired:
        check_chargeable(late, None, now)
    assert (expired.value.status, expired.value.code) == (410, "ERR_PAYMENT_INTENT_EXPIRED")
    with pytest.raises(ApiError) as waiting:
        check_chargeable(late, None, now, approved_in_time=True)
    assert (waiting.value.status, waiting.value.code) == (422, "ERR_APPROVAL_NOT_CONFIRMED")
    confirmed = SimpleNamespace(id="pi_1", status="approval_confirmed", expires_at=now - timedelta(seconds=1))
    check_chargeable(confirmed, None, now)  # confirmed after its expiry: chargeable
