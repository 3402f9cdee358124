"""The JSON shapes of payment intents and charges: the API's bodies and the payloads of their events."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from eth_utils import to_checksum_address

from vip.formats import iso, usd
from vip.payments.records import Charge, PaymentIntent


def intent_json(row: PaymentIntent) -> dict[str, Any]:
    """The spec's Payment intent, plus the funding wallet, metadata, the confirmed approval and how it
    covers the intent. `approval_calldata.amount` is the total allowance the funding wallet must give the
    spender (every open intent of it, token and spender, plus this one: vip.payments.ledger), so that
    following it never lowers another intent's cover."""
    contract = to_checksum_address(row.contract_address)
    token_contract = to_checksum_address(row.token_address)
    total = row.approval_amount if row.approval_amount is not None else row.amount
    approval: dict[str, Any] = {"function": "approve", "spender": contract, "amount": str(int(total)),
                                "token_contract": token_contract}
    if row.approval_reset_required:
        # USDT refuses to change a non-zero allowance to another non-zero one: approve(spender, 0) first.
        approval["reset_calldata"] = {"function": "approve", "spender": contract, "amount": "0",
                                      "token_contract": token_contract}
    return {
        "id": row.id,
        "status": row.status,
        "user_id": row.user_id,
        "amount_usd": usd(Decimal(row.amount_usd)),
        "token": row.token,
        "network": row.network,
        "recipient_wallet": to_checksum_address(row.recipient_wallet),
        "funding_wallet": to_checksum_address(row.funding_wallet),
        "contract_address": contract,
        "approval_calldata": approval,
        "approval_tx_hash": row.approval_tx_hash,
        "approval_coverage": row.approval_coverage,
        "metadata": row.metadata,
        "expires_at": iso(row.expires_at),
        "created_at": iso(row.created_at),
    }


def charge_json(charge: Charge, intent: PaymentIntent) -> dict[str, Any]:
    """The spec's Charge, plus the approval it used, failure details and its creation time."""
    return {
        "id": charge.id,
        "payment_intent_id": charge.payment_intent_id,
        "status": charge.status,
        "amount_usd": usd(Decimal(intent.amount_usd)),
        "token": intent.token,
        "network": charge.network,
        "disbursement_tx_hash": charge.disbursement_tx_hash,
        "recipient_wallet": to_checksum_address(intent.recipient_wallet),
        "approval_tx_hash": charge.approval_tx_hash,
        "executed_at": iso(charge.executed_at),
        "failure_code": charge.failure_code,
        "failure_message": charge.failure_message,
        "created_at": iso(charge.created_at),
    }
