"""The OpenAPI 3.1 document of the API, served at /v1/openapi.json and rendered at /docs.

Request bodies come from the pydantic models the handlers validate with, so the document cannot drift
from validation; response schemas are written here and checked against real responses by the tests.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel

API_VERSION = "1.0.0"

ID = {"type": "string"}
TIMESTAMP = {"type": "string", "format": "date-time"}
NULLABLE_TIMESTAMP = {"type": ["string", "null"], "format": "date-time"}
ADDRESS = {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}
NUMBER = {"type": "number"}


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, **extra}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": obj({
        "code": {"type": "string", "description": "Stable machine-readable code, e.g. ERR_VALIDATION"},
        "message": {"type": "string"},
        "details": {"type": "object", "description": "Depends on the error; for validation errors, the "
                                                     "offending fields and what is wrong with each"},
        "request_id": {"type": "string"},
    })}),
    "User": obj({"id": ID, "external_id": {"type": ["string", "null"]}, "metadata": {"type": "object"},
                 "created_at": TIMESTAMP}),
    "ApiKey": obj({
        "id": ID, "prefix": {"type": "string"},
        "scopes": {"type": "array", "items": {"enum": ["read", "write", "disburse", "admin"]}},
        "description": {"type": ["string", "null"]}, "created_at": TIMESTAMP,
        "last_used_at": NULLABLE_TIMESTAMP, "revoked_at": NULLABLE_TIMESTAMP,
        "status": {"enum": ["active", "revoked"]},
        "secret": {"type": "string", "description": "Only in the creation response; shown once"},
    }, required=["id", "prefix", "scopes", "created_at", "status"]),
    "Connection": obj({
        "id": ID, "user_id": ID, "type": {"enum": ["wallet", "platform"]}, "provider": {"type": "string"},
        "identifier": {"type": "string"}, "network": {"type": "string"},
        "source_type": {"type": ["string", "null"]}, "status": {"enum": ["active", "revoked", "expired"]},
        "created_at": TIMESTAMP, "last_synced_at": NULLABLE_TIMESTAMP,
    }, required=["id", "user_id", "type", "provider", "identifier", "status", "created_at"]),
    "ConnectionListItem": obj({
        "id": ID, "type": {"enum": ["wallet", "platform"]}, "provider": {"type": "string"},
        "identifier": {"type": "string"}, "network": {"type": "string"},
        "source_type": {"type": ["string", "null"]}, "status": {"enum": ["active", "revoked", "expired"]},
        "created_at": TIMESTAMP,
    }, required=["id", "type", "provider", "identifier", "status", "created_at"]),
    "Wallet": obj({
        "id": ID, "connection_id": ID, "address": ADDRESS, "network": {"type": "string"},
        "usdc_balance": NUMBER, "usdt_balance": NUMBER,
        "first_seen_block": {"type": ["integer", "null"]}, "created_at": TIMESTAMP,
    }),
    "PayrollMatch": obj({
        "matched": {"type": "boolean"}, "payroll_period": {"type": "string", "pattern": r"^\d{4}-\d{2}$"},
        "origin_platform": {"type": "string"},
        "match_confidence": {"enum": ["exact", "close", "approximate"]},
    }),
    "Transaction": obj({
        "id": ID, "wallet_id": ID, "user_id": ID, "tx_hash": {"type": "string"},
        "block_number": {"type": "integer"}, "block_timestamp": TIMESTAMP,
        "direction": {"enum": ["inbound", "outbound"]}, "from_address": ADDRESS, "to_address": ADDRESS,
        "token": {"enum": ["USDC", "USDT"]}, "amount": NUMBER, "network": {"type": "string"},
        "classification": {"enum": ["verified_income", "p2p", "dex_trade", "wash_trade", "circular",
                                    "unknown"]},
        "fraud_flags": {"type": "array", "items": {"type": "string"}},
        "payroll_match": ref("PayrollMatch"),
    }, required=["id", "wallet_id", "user_id", "tx_hash", "block_number", "block_timestamp", "direction",
                 "from_address", "to_address", "token", "amount", "network", "classification",
                 "fraud_flags"]),
    "Pagination": obj({"cursor": {"type": ["string", "null"]}, "has_more": {"type": "boolean"}}),
}

# --- webhooks (issue 6) ---
_EVENT_TYPES = {"type": "string", "description": "See docs/webhooks.md for the catalogue"}
SCHEMAS.update({
    "WebhookEndpoint": obj({
        "id": ID, "url": {"type": "string"}, "description": {"type": ["string", "null"]},
        "event_types": {"type": "array", "items": _EVENT_TYPES, "description": "[\"*\"]: every type"},
        "status": {"enum": ["enabled", "deleted"]}, "created_at": TIMESTAMP,
        "previous_secret_expires_at": {**NULLABLE_TIMESTAMP, "description": "Until then the secret before "
                                       "the last rotation also signs (a second Service-Signature header)"},
        "deleted_at": NULLABLE_TIMESTAMP,
        "secret": {"type": "string", "description": "Signing secret, only in the create and rotate-secret "
                                                    "responses; shown once"},
    }, required=["id", "url", "description", "event_types", "status", "created_at",
                 "previous_secret_expires_at", "deleted_at"]),
    "Event": obj({
        "id": ID, "type": _EVENT_TYPES, "created_at": TIMESTAMP, "api_version": {"const": "v1"},
        "data": obj({"object": {"type": "object", "description": "The resource, in its API schema"}}),
        "delivery_status": {"enum": ["pending", "delivered", "failed", "none"],
                            "description": "pending: a delivery is still due; failed: a delivery gave up "
                                           "after 5 attempts; delivered: every endpoint got it; none: no "
                                           "endpoint subscribed"},
    }),
    "WebhookAttempt": obj({
        "attempted_at": TIMESTAMP, "status_code": {"type": ["integer", "null"]},
        "error": {"type": ["string", "null"]}, "duration_ms": {"type": "integer"},
    }),
    "WebhookDelivery": obj({
        "id": ID, "endpoint_id": ID, "url": {"type": "string"},
        "status": {"enum": ["pending", "delivered", "failed", "cancelled"]},
        "attempt_count": {"type": "integer", "description": "Attempts in the current round (a replay "
                                                            "starts a new one); at most 5"},
        "next_attempt_at": NULLABLE_TIMESTAMP, "delivered_at": NULLABLE_TIMESTAMP,
        "attempts": {"type": "array", "items": ref("WebhookAttempt"), "description": "Every attempt"},
    }),
})
SCHEMAS["EventDetail"] = {"allOf": [ref("Event"), obj({"deliveries": {
    "type": "array", "items": ref("WebhookDelivery")}})]}

RATE_HEADERS = {
    "X-RateLimit-Limit": {"schema": {"type": "integer"}, "description": "Requests allowed per minute"},
    "X-RateLimit-Remaining": {"schema": {"type": "integer"}, "description": "Requests left this minute"},
    "X-RateLimit-Reset": {"schema": {"type": "integer"}, "description": "Seconds until the window resets"},
    "X-Request-Id": {"schema": {"type": "string"}, "description": "Also in error bodies"},
}

ERRORS = {
    "400": "Bad request: see error.code and error.details",
    "401": "Missing, malformed, unknown or revoked API key",
    "403": "The API key lacks the scope this operation needs",
    "404": "Not found (or another organisation's)",
    "409": "Conflict (e.g. an Idempotency-Key reused with another request)",
    "422": "A prerequisite is missing or a check failed: see error.code",
    "429": "Rate limit exceeded: see Retry-After",
    "500": "Unexpected error (logged, never a stack trace)",
    "502": "A connected platform failed: ERR_PLATFORM_SYNC_FAILED",
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "headers": RATE_HEADERS,
            "content": {"application/json": {"schema": ref("Error")}}}


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "headers": RATE_HEADERS,
            "content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: dict[str, Any], required: bool = False, description: str = "") -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def operation(summary: str, scope: str | None, responses: dict[str, Any], *, errors: tuple[str, ...] = (),
              parameters: list[dict] | None = None, body: type[BaseModel] | None = None,
              tag: str = "API") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "responses": dict(responses)}
    if body is not None:
        errors = ("409", *errors)  # an Idempotency-Key reused with another request
    if scope is None:
        op["security"] = []
    else:
        op["description"] = f"Requires an API key with the `{scope}` scope."
        errors = ("401", "403", *errors)
    for code in ("400", *errors, "429", "500"):
        op["responses"].setdefault(code, _error(ERRORS[code]))
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": ref(body.__name__)}}}
        op.setdefault("parameters", []).append({
            "name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string",
                                                                                     "maxLength": 255},
            "description": "Same key and body within 24 h: the first response again; other body: 409"})
    return op


def _body_schemas(models: list[type[BaseModel]]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def build_document(paths: dict[str, dict[str, Any]], body_models: list[type[BaseModel]],
                   base_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Stablecoin income verification, risk scoring and disbursement API",
            "version": API_VERSION,
            "description": "Amounts of tokens are token units (USDC and USDT have 6 decimals) and USD "
                           "values are exact decimal numbers with at most 6 decimals. Timestamps are "
                           "ISO 8601 UTC. Every response carries X-Request-Id and X-RateLimit-* headers; "
                           "every error has the body in the Error schema.",
        },
        "servers": [{"url": base_url}],
        "components": {
            "schemas": {**copy.deepcopy(SCHEMAS), **_body_schemas(body_models)},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "Authorization: Bearer <secret API key>"}},
        },
        "security": [{"apiKey": []}],
        "paths": paths,
    }


@cache
def document(base_url: str) -> dict[str, Any]:
    """The served document (built once per process)."""
    from api.openapi_paths import BODY_MODELS, PATHS

    return build_document(PATHS, BODY_MODELS, base_url)
