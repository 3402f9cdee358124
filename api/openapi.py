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

from vip.api.openapi_constraints import SHIPPED, ServedValues, with_constraints
from vip.api.openapi_examples import REQUESTS, RESPONSES, error_example
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


# A short name for each operation (the sidebar's entry and the page's heading) and its operationId; the
# sentence written in openapi_paths.py becomes the first line of its description.
NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("get", "/v1/health"): ("Health", "getHealth"),
    ("post", "/v1/users"): ("Create a user", "createUser"),
    ("get", "/v1/users/{user_id}"): ("Read a user", "getUser"),
    ("post", "/v1/api-keys"): ("Create an API key", "createApiKey"),
    ("get", "/v1/api-keys"): ("List API keys", "listApiKeys"),
    ("delete", "/v1/api-keys/{key_id}"): ("Revoke an API key", "revokeApiKey"),
    ("get", "/v1/connect/wallet/nonce"): ("Get a sign-in nonce", "getWalletNonce"),
    ("post", "/v1/connect/wallet"): ("Connect a wallet", "connectWallet"),
    ("post", "/v1/sign-in-domains"): ("Register a sign-in domain", "registerSignInDomain"),
    ("get", "/v1/sign-in-domains"): ("List sign-in domains", "listSignInDomains"),
    ("delete", "/v1/sign-in-domains/{domain}"): ("Remove a sign-in domain", "removeSignInDomain"),
    ("get", "/v1/connect/platform/authorize"): ("Start a platform OAuth", "authorizePlatform"),
    ("get", "/v1/connect/platform/callback"): ("Platform OAuth callback", "platformCallback"),
    ("post", "/v1/connect/platform/direct"): ("Push a platform account", "connectPlatformDirect"),
    ("get", "/v1/connections"): ("List connections", "listConnections"),
    ("delete", "/v1/connections/{connection_id}"): ("Revoke a connection", "revokeConnection"),
    ("get", "/v1/wallets"): ("List wallets", "listWallets"),
    ("get", "/v1/transactions"): ("List transactions", "listTransactions"),
    ("post", "/v1/payment-intents"): ("Create a payment intent", "createPaymentIntent"),
    ("get", "/v1/payment-intents/{intent_id}"): ("Read a payment intent", "getPaymentIntent"),
    ("post", "/v1/charges"): ("Execute a charge", "createCharge"),
    ("get", "/v1/charges/{charge_id}"): ("Read a charge", "getCharge"),
    ("post", "/v1/funding-wallets/nonce"): ("Get a funding wallet challenge", "createFundingWalletNonce"),
    ("post", "/v1/funding-wallets"): ("Register a funding wallet", "registerFundingWallet"),
    ("get", "/v1/funding-wallets"): ("List funding wallets", "listFundingWallets"),
    ("delete", "/v1/funding-wallets/{address}"): ("Remove a funding wallet", "removeFundingWallet"),
    ("put", "/v1/funding-wallets/{address}/default"): ("Set the default funding wallet",
                                                       "setDefaultFundingWallet"),
    ("post", "/v1/dev/time-travel"): ("Time travel (local networks)", "timeTravel"),
    ("post", "/v1/test-clocks"): ("Create a test clock", "createTestClock"),
    ("get", "/v1/dev/personas"): ("List personas", "listPersonas"),
    ("post", "/v1/dev/personas"): ("Make a persona", "createPersona"),
    ("get", "/v1/test-clocks/{clock_id}"): ("Read a test clock", "getTestClock"),
    ("post", "/v1/test-clocks/{clock_id}/advance"): ("Advance a test clock", "advanceTestClock"),
    ("get", "/v1/vip-report"): ("Get the VIP report", "getVipReport"),
    ("get", "/v1/risk-score"): ("Get the risk score", "getRiskScore"),
    ("post", "/v1/webhook-endpoints"): ("Create a webhook endpoint", "createWebhookEndpoint"),
    ("get", "/v1/webhook-endpoints"): ("List webhook endpoints", "listWebhookEndpoints"),
    ("delete", "/v1/webhook-endpoints/{endpoint_id}"): ("Delete a webhook endpoint", "deleteWebhookEndpoint"),
    ("post", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret"): ("Rotate a signing secret",
                                                                   "rotateWebhookSecret"),
    ("get", "/v1/events"): ("List events", "listEvents"),
    ("get", "/v1/events/{event_id}"): ("Read an event", "getEvent"),
    ("post", "/v1/events/{event_id}/replay"): ("Replay an event", "replayEvent"),
    ("post", "/v1/webhook-endpoints/{endpoint_id}/enable"): ("Enable a webhook endpoint",
                                                             "enableWebhookEndpoint"),
    ("post", "/v1/events/trigger"): ("Trigger a test event", "triggerEvent"),
    ("get", "/v1/events/stream"): ("Stream events live", "streamEvents"),
}


def finished(paths: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The paths as served: each operation with its short name and operationId, and an example on every
    request body and every response (api/openapi_examples.py)."""
    paths = copy.deepcopy(paths)
    for path, item in paths.items():
        for verb, op in item.items():
            name, op_id = NAMES[(verb, path)]
            sentence = op["summary"].rstrip(".") + "."
            op["description"] = f"{sentence}\n\n{op['description']}" if "description" in op else sentence
            op["summary"], op["operationId"] = name, op_id
            if "requestBody" in op:
                media = op["requestBody"]["content"]["application/json"]
                media["example"] = REQUESTS[media["schema"]["$ref"].rsplit("/", 1)[1]]
            for status, response in op["responses"].items():
                media = response.get("content", {}).get("application/json")
                if media is not None:
                    media["example"] = (error_example(verb, path, status) if status >= "400"
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
        "paths": finished(paths),
        "webhooks": webhooks(),
    }


@cache
def document(base_url: str, served: ServedValues = SHIPPED) -> dict[str, Any]:
    """The served document (built once per process): `served`, the values the deployment's configuration
    accepts (its networks, platforms), are stated in it (api/openapi_constraints.py)."""
    built = build_document(PATHS, BODY_MODELS, base_url)
    return with_constraints(built, served, sorted(_body_schemas(BODY_MODELS)))
