"""The OpenAPI 3.1 document of the API, served at /v1/openapi.json and rendered at /docs.

Request bodies come from the pydantic models the handlers validate with, so the document cannot drift
from validation; response schemas come from api/openapi_schemas.py, the paths from api/openapi_paths.py,
the webhook events from api/openapi_webhooks.py and every example from api/openapi_examples.py.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel

from vip.api.openapi_examples import ERRORS, REQUESTS, RESPONSES
from vip.api.openapi_paths import BODY_MODELS, PATHS
from vip.api.openapi_schemas import API_VERSION, SCHEMAS
from vip.api.openapi_webhooks import OWN_SCHEMAS, webhooks

# Keywords that constrain every type alike: a branch holding one cannot be merged into a list of types.
_ANY_TYPE_KEYWORDS = {"enum", "const", "not", "allOf", "anyOf", "oneOf", "$ref", "if", "then", "else"}
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "contains")

TAGS = [
    {"name": "Service", "description": "Whether the service and its database answer."},
    {"name": "API keys", "description": "Keys of the caller's organisation, each with scopes (read, write, "
                                        "disburse, admin). A secret is shown once, at creation."},
    {"name": "Users", "description": "The borrowers a lender verifies. Everything else hangs off a user."},
    {"name": "Connections", "description": "Wallets (Sign-In with Ethereum) and income platforms (OAuth or "
                                           "a direct push) a user connects; their history is indexed."},
    {"name": "Wallets", "description": "Connected wallets' balances and their normalized, fraud-filtered "
                                       "stablecoin transactions."},
    {"name": "Verification", "description": "The Verified Income Profile (VIP) and its four-pillar risk "
                                            "score."},
    {"name": "Disbursement", "description": "Register a funding wallet, stage a payment intent, have the "
                                            "funding wallet approve it, then execute the charge."},
    {"name": "Webhooks", "description": "Endpoints that receive the events, the events with their delivery "
                                        "status, and replay. See Webhook events for each payload."},
    {"name": "Webhook events", "description": "What the service POSTs to an endpoint, one entry per event "
                                              "type, signed with the endpoint's secret (docs/webhooks.md)."},
    {"name": "Development", "description": "Test tools for local networks only."},
]
# Redoc's navigation: the tags grouped by feature (every tag is in a group, or Redoc hides it).
TAG_GROUPS = [
    {"name": "Getting started", "tags": ["Service", "API keys", "Users"]},
    {"name": "Income verification", "tags": ["Connections", "Wallets", "Verification"]},
    {"name": "Disbursement", "tags": ["Disbursement"]},
    {"name": "Webhooks", "tags": ["Webhooks", "Webhook events"]},
    {"name": "Development", "tags": ["Development"]},
]


def _merge_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` of single-type branches (pydantic's `X | None`) as one schema with a list of types, when
    that means the same: each branch's keywords apply to its own type only, and no keyword repeats."""
    branches = schema["anyOf"]
    if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in branches):
        return schema
    types = [b["type"] for b in branches]
    keywords = [k for b in branches for k in b if k != "type"]
    if len(set(types)) < len(types) or len(set(keywords)) < len(keywords) or set(keywords) & set(schema):
        return schema
    merged = {k: v for k, v in schema.items() if k != "anyOf"}
    for branch in branches:
        rest = {k: v for k, v in branch.items() if k != "type"}
        if set(rest) & _ANY_TYPE_KEYWORDS:
            if set(rest) != {"enum"} or types != [branch["type"], "null"] or len(branches) != 2:
                return schema
            rest = {"enum": [*rest["enum"], None]}
        merged.update(rest)
    merged["type"] = types
    return merged


def tidy(schema: Any) -> Any:
    """A pydantic JSON schema as a reader wants it: no titles (they repeat the names), `X | None` as a
    list of types (OpenAPI 3.1), descriptions on one line (docstrings wrap)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k != "title"}
    if isinstance(out.get("description"), str):
        out["description"] = " ".join(out["description"].split())
    if isinstance(out.get("properties"), dict):
        out["properties"] = {name: tidy(sub) for name, sub in out["properties"].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [tidy(sub) for sub in out[key]]
    for key in _SUBSCHEMAS:
        if isinstance(out.get(key), dict):
            out[key] = tidy(out[key])
    if isinstance(out.get("anyOf"), list):
        out = _merge_nullable(out)
    return out


def _body_schemas(models: list[type[BaseModel]]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update({name: tidy(sub) for name, sub in schema.pop("$defs", {}).items()})
        schemas[model.__name__] = tidy(schema)
    return schemas


def with_examples(paths: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The paths with an example on every request body and every response (api/openapi_examples.py)."""
    paths = copy.deepcopy(paths)
    for path, item in paths.items():
        for verb, op in item.items():
            if "requestBody" in op:
                media = op["requestBody"]["content"]["application/json"]
                media["example"] = REQUESTS[media["schema"]["$ref"].rsplit("/", 1)[1]]
            for status, response in op["responses"].items():
                media = response.get("content", {}).get("application/json")
                if media is not None:
                    media["example"] = (ERRORS[status] if status >= "400"
                                        else RESPONSES[(verb, path, status)])
    return paths


def build_document(paths: dict[str, dict[str, Any]], body_models: list[type[BaseModel]],
                   base_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Stablecoin income verification, risk scoring and disbursement API",
            "version": API_VERSION,
            "description": "Verify a borrower's income from the stablecoin salary their wallet receives, "
                           "score it, and disburse USDC or USDT to them from the lender's own wallet.\n\n"
                           "Amounts of tokens are token units (USDC and USDT have 6 decimals) and USD "
                           "values are exact decimal numbers with at most 6 decimals. Timestamps are "
                           "ISO 8601 UTC. Every response carries X-Request-Id and X-RateLimit-* headers; "
                           "every error has the body in the Error schema.",
        },
        "servers": [{"url": base_url}],
        "tags": TAGS,
        "x-tagGroups": TAG_GROUPS,
        "components": {
            "schemas": {**copy.deepcopy(SCHEMAS), **copy.deepcopy(OWN_SCHEMAS), **_body_schemas(body_models)},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "Authorization: Bearer <secret API key>"}},
        },
        "security": [{"apiKey": []}],
        "paths": with_examples(paths),
        "webhooks": webhooks(),
    }


@cache
def document(base_url: str) -> dict[str, Any]:
    """The served document (built once per process)."""
    return build_document(PATHS, BODY_MODELS, base_url)
