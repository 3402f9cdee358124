"""What a webhook event must look like: the schema of its delivery body in the document's top-level
`webhooks` (api/openapi_webhooks.py: the spec's envelope, and a `data.object` in the OpenAPI schema of the
resource it carries, in the status the event announces, or the spec's shape for `fraud.flagged`, or our
documented shape for `income.change_detected`), and no field the schema does not name. `vip.verified` is a
VipReport, which holds every field of the spec's exemplified shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator

from vip.api.openapi import document
from vip.api.openapi_webhooks import EVENTS
from vip.webhooks.catalogue import EVENT_TYPES

# The spec's exemplified shape of a vip.verified object.
VIP_VERIFIED_FIELDS = {"id", "user_id", "status", "verified_monthly_income_usd", "periods_verified",
                       "consistency_rate", "generated_at"}
ENVELOPE_FIELDS = {"id", "type", "created_at", "api_version", "data"}


def webhook_schema(event_type: str) -> dict[str, Any]:
    """The JSON schema of a delivery body of `event_type`, as the served document's `webhooks` has it
    (components included, so its references resolve)."""
    doc = document("http://vip.test")
    body = doc["webhooks"][event_type]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**body, "components": doc["components"]}


def schema_problems(event_type: str, envelope: Any) -> list[str]:
    validator = Draft202012Validator(webhook_schema(event_type),
                                     format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
            for e in validator.iter_errors(envelope)]


def header_problems(event_type: str, values: dict[str, list[str]]) -> list[str]:
    """Why a delivery's headers (name: every value) break the parameters `webhooks` documents for them."""
    problems = []
    for param in document("http://vip.test")["webhooks"][event_type]["post"]["parameters"]:
        got = values.get(param["name"], [])
        if param["required"] and not got:
            problems.append(f"{param['name']}: missing")
        validator = Draft202012Validator(param["schema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
        problems += [f"{param['name']}: {e.message}" for value in got for e in validator.iter_errors(value)]
    return problems


def object_problems(event_type: str, obj: Any) -> list[str]:
    """Why `obj` is not a valid data.object of `event_type` (empty when it is)."""
    problems = schema_problems(event_type, {"id": "evt_0", "type": event_type, "created_at":
                                            "2027-01-01T00:00:00Z", "api_version": "v1",
                                            "data": {"object": obj}})
    if isinstance(obj, dict):
        fields = set(document("http://vip.test")["components"]["schemas"][EVENTS[event_type][0]]["properties"])
        problems += [f"{key}: not in the schema" for key in sorted(set(obj) - fields)]
        if event_type == "vip.verified":
            missing = VIP_VERIFIED_FIELDS - set(obj)
            problems += [f"{key}: missing (the spec's shape)" for key in sorted(missing)]
    return problems


def envelope_problems(envelope: Any) -> list[str]:
    """Why `envelope` is not the spec's event envelope (id, type, created_at, api_version v1, data.object)."""
    if not isinstance(envelope, dict):
        return ["not a JSON object"]
    problems = []
    if set(envelope) != ENVELOPE_FIELDS:
        problems.append(f"fields {sorted(envelope)}, not {sorted(ENVELOPE_FIELDS)}")
    if envelope.get("type") not in EVENT_TYPES:
        problems.append(f"type {envelope.get('type')!r} is not catalogued")
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
        problems += schema_problems(envelope["type"], envelope)
        problems += [p for p in object_problems(envelope["type"], data["object"]) if "not in the schema" in p
                     or "spec's shape" in p]
    return problems
