"""The document's top-level `webhooks` (OpenAPI 3.1): for every event type the service emits, the request
it sends to a lender's endpoint, with the schema of its body and an example.

`data.object` is the resource in the schema of its API response, in the state the event announces (its
`status`), or a shape of its own for the two events no API resource carries. The tests validate real
deliveries against these schemas (tests/support/event_shapes.py reads them from here).
"""

from __future__ import annotations

from typing import Any

from vip.api.openapi_examples import event_example
from vip.api.openapi_schemas import TIMESTAMP, obj, ref
from vip.webhooks.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

_NUMBER = {"type": "number"}
_STRING = {"type": "string"}
# The two objects no API resource carries (components/schemas).
OWN_SCHEMAS = {
    # The spec's table for fraud.flagged.
    "FraudFlagged": obj({
        "user_id": _STRING, "wallet_id": _STRING, "tx_hash": _STRING,
        "fraud_type": {"enum": ["wash_trade", "circular"]}, "amount_usd": _NUMBER, "flagged_at": TIMESTAMP,
        "details": {"type": "string", "minLength": 1, "description": "Why the transfer was flagged"}}),
    "IncomeChange": obj({
        "user_id": _STRING, "vip_id": _STRING, "previous_vip_id": _STRING,
        "previous_verified_monthly_income_usd": _NUMBER, "verified_monthly_income_usd": _NUMBER,
        "change_pct": {"type": "number", "description": "Signed fraction of the previous income"},
        "detected_at": TIMESTAMP}),
}

# event type: (schema of data.object, the `status` it announces or None, what happened)
EVENTS: dict[str, tuple[str, str | None, str]] = {
    "connection.wallet.created": ("Connection", "active",
                                  "A wallet was connected (POST /v1/connect/wallet, Sign-In with Ethereum)."),
    "connection.platform.created": ("Connection", "active",
                                    "A platform account was connected, by the OAuth callback or a direct "
                                    "push. Connecting the same account again fires nothing."),
    "connection.revoked": ("Connection", "revoked", "A connection was revoked."),
    "vip.generating": ("VipReport", "pending", "VIP generation started (the report is pending)."),
    "vip.verified": ("VipReport", "verified", "A VIP was generated with every requested period verified."),
    "vip.partially_verified": ("VipReport", "partially_verified",
                               "A VIP was generated with one or more unverified periods (each with its "
                               "reasons)."),
    "vip.unverified": ("VipReport", "unverified",
                       "A VIP was generated with no verified period (error_code ERR_INSUFFICIENT_HISTORY)."),
    "vip.failed": ("VipReport", "error", "VIP generation failed (see error_code)."),
    "income.change_detected": ("IncomeChange", None,
                               "A new VIP's verified monthly income moved by more than the configured "
                               "threshold (10% by default) against the user's previous VIP."),
    "fraud.flagged": ("FraudFlagged", None,
                      "A transfer was flagged as a wash trade or a circular flow (once per transfer)."),
    "risk_score.generated": ("RiskScore", None, "A risk score was computed for a VIP (once per VIP)."),
    "payment_intent.created": ("PaymentIntent", "pending_approval", "A payment intent was staged."),
    "payment_intent.approval_confirmed": ("PaymentIntent", "approval_confirmed",
                                          "The funding wallet's approve() was confirmed on chain."),
    "payment_intent.expired": ("PaymentIntent", "expired", "A payment intent expired before its approval."),
    "charge.succeeded": ("Charge", "succeeded", "The disbursement was mined and succeeded."),
    "charge.failed": ("Charge", "failed", "The disbursement was refused or reverted (see failure_code)."),
    "webhook_endpoint.disabled": ("WebhookEndpoint", "disabled",
                                  "One of the organisation's endpoints was disabled: every attempt to "
                                  "reach it failed for webhooks.disable_after_days (3 days). Sent to its "
                                  "other endpoints."),
}

_HEADERS = [
    {"name": SIGNATURE_HEADER, "in": "header", "required": True,
     "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
     "description": "sha256= and the lowercase hex HMAC-SHA256 of the raw body, keyed with the endpoint's "
                    "whole secret (whsec_...). During a rotation's overlap one header per valid secret."},
    {"name": EVENT_ID_HEADER, "in": "header", "required": True, "schema": {"type": "string"},
     "description": "The event's id, the same on every retry and replay: drop duplicates with it"},
    {"name": TIMESTAMP_HEADER, "in": "header", "required": True, "schema": TIMESTAMP,
     "description": "When this attempt was sent (not signed)"},
]


def envelope_schema(event_type: str) -> dict[str, Any]:
    """The JSON schema of a delivery's body for `event_type` (refs into components/schemas)."""
    name, status, _ = EVENTS[event_type]
    carried = ref(name) if status is None else {
        "allOf": [ref(name), {"properties": {"status": {"const": status}}}]}
    return obj({
        "id": {"type": "string", "pattern": "^evt_", "description": "Also in the Service-Event-Id header"},
        "type": {"type": "string", "const": event_type}, "created_at": TIMESTAMP,
        "api_version": {"type": "string", "const": "v1"},
        "data": obj({"object": carried, "test": {
            "const": True, "description": "Only on test events (POST /v1/events/trigger, `vip trigger`): "
                                          "a sample object, no real change"}},
            required=["object"], additionalProperties=False),
    }, additionalProperties=False)


def webhooks() -> dict[str, Any]:
    return {event_type: {"post": {
        "summary": event_type, "description": what, "tags": ["Webhook events"],
        "operationId": "event_" + event_type.replace(".", "_"),
        "parameters": _HEADERS,
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": envelope_schema(event_type), "example": event_example(event_type)}}},
        "responses": {
            "200": {"description": "Any 2xx within 10 s acknowledges the delivery. Anything else, or no "
                                   "answer, is retried: after 5 min, 30 min, 2 h and 8 h."}},
        "security": [],
    }} for event_type, (_, _, what) in EVENTS.items()}
