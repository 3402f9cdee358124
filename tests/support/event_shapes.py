"""What a webhook event must look like: the spec's envelope, and a `data.object` in the OpenAPI schema of
the resource it carries (no field the schema does not name), or the spec's shape for `fraud.flagged`, or
our documented shape for `income.change_detected` (no API resource carries it). `vip.verified` is a
VipReport, which holds every field of the spec's exemplified shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator

from vip.api.openapi import document
from vip.webhooks.catalogue import EVENT_TYPES

RESOURCE_SCHEMAS = {
    "connection.wallet.created": "Connection",
    "connection.platform.created": "Connection",
    "connection.revoked": "Connection",
    "vip.generating": "VipReport",
    "vip.verified": "VipReport",
    "vip.partially_verified": "VipReport",
    "vip.unverified": "VipReport",
    "vip.failed": "VipReport",
    "risk_score.generated": "RiskScore",
    "payment_intent.created": "PaymentIntent",
    "payment_intent.approval_confirmed": "PaymentIntent",
    "payment_intent.expired": "PaymentIntent",
    "charge.succeeded": "Charge",
    "charge.failed": "Charge",
    "webhook_endpoint.disabled": "WebhookEndpoint",
}
_STRING = {"type": "string"}
_TIMESTAMP = {"type": "string", "format": "date-time"}
_NUMBER = {"type": "number"}
OWN_SHAPES: dict[str, dict[str, Any]] = {
    # The spec's table: user_id, wallet_id, tx_hash, fraud_type (e.g. wash_trade), amount_usd (number),
    # flagged_at (timestamp), details (string).
    "fraud.flagged": {"user_id": _STRING, "wallet_id": _STRING, "tx_hash": _STRING,
                      "fraud_type": {"enum": ["wash_trade", "circular"]}, "amount_usd": _NUMBER,
                      "flagged_at": _TIMESTAMP, "details": {"type": "string", "minLength": 1}},
    # docs/webhooks.md: the new VIP against the previous finished one.
    "income.change_detected": {"user_id": _STRING, "vip_id": _STRING, "previous_vip_id": _STRING,
                               "previous_verified_monthly_income_usd": _NUMBER,
                               "verified_monthly_income_usd": _NUMBER, "change_pct": _NUMBER,
                               "detected_at": _TIMESTAMP},
}
# The spec's exemplified shape of a vip.verified object.
VIP_VERIFIED_FIELDS = {"id", "user_id", "status", "verified_monthly_income_usd", "periods_verified",
                       "consistency_rate", "generated_at"}
# The state of its resource an event announces.
STATUSES = {
    "connection.wallet.created": "active", "connection.platform.created": "active",
    "connection.revoked": "revoked", "vip.generating": "pending", "vip.verified": "verified",
    "vip.partially_verified": "partially_verified", "vip.unverified": "unverified", "vip.failed": "error",
    "payment_intent.created": "pending_approval", "payment_intent.approval_confirmed": "approval_confirmed",
    "payment_intent.expired": "expired", "charge.succeeded": "succeeded", "charge.failed": "failed",
    "webhook_endpoint.disabled": "disabled",
}
ENVELOPE_FIELDS = {"id", "type", "created_at", "api_version", "data"}


def _schema_of(event_type: str) -> tuple[dict[str, Any], set[str]]:
    """The JSON schema of the type's data.object (components included) and the fields it names."""
    doc = document("http://vip.test")
    if event_type in RESOURCE_SCHEMAS:
        name = RESOURCE_SCHEMAS[event_type]
        schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        return schema, set(doc["components"]["schemas"][name]["properties"])
    shape = OWN_SHAPES[event_type]
    return {"type": "object", "properties": shape, "required": list(shape)}, set(shape)


def object_problems(event_type: str, obj: Any) -> list[str]:
    """Why `obj` is not a valid data.object of `event_type` (empty when it is)."""
    schema, fields = _schema_of(event_type)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(object)'}: {e.message}"
                for e in validator.iter_errors(obj)]
    if isinstance(obj, dict):
        problems += [f"{key}: not in the schema" for key in sorted(set(obj) - fields)]
        if event_type == "vip.verified":
            missing = VIP_VERIFIED_FIELDS - set(obj)
            problems += [f"{key}: missing (the spec's shape)" for key in sorted(missing)]
        expected = STATUSES.get(event_type)
        if expected is not None and obj.get("status") != expected:
            problems.append(f"status: {obj.get('status')!r}, not {expected!r}")
    return problems


def envelope_problems(envelope: Any) -> list[str]:
    """Why `envelope` is not the spec's event envelope (id, type, created_at, api_version v1, data.object)."""
    if not isinstance(envelope, dict):
        return ["not a JSON object"]
    problems = []
    if set(envelope) != ENVELOPE_FIELDS:
        problems.append(f"fields {sorted(envelope)}, not {sorted(ENVELOPE_FIELDS)}")
    if not str(envelope.get("id", "")).startswith("evt_"):
        problems.append(f"id {envelope.get('id')!r}")
    if envelope.get("type") not in EVENT_TYPES:
        problems.append(f"type {envelope.get('type')!r} is not catalogued")
    if envelope.get("api_version") != "v1":
        problems.append(f"api_version {envelope.get('api_version')!r}")
    created = envelope.get("created_at")
    try:
        if not (isinstance(created, str) and created.endswith("Z") and datetime.fromisoformat(created)):
            problems.append(f"created_at {created!r} is not a UTC timestamp")
    except ValueError:
        problems.append(f"created_at {created!r} is not a timestamp")
    data = envelope.get("data")
    # A test event (vip trigger) also says so: "test": true.
    if (not isinstance(data, dict) or set(data) - {"test"} != {"object"} or data.get("test", True) is not True
            or not isinstance(data["object"], dict)):
        problems.append("data is not {\"object\": {...}} (with \"test\": true on a test event)")
    elif envelope.get("type") in EVENT_TYPES:
        problems += object_problems(envelope["type"], data["object"])
    return problems
