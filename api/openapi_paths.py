"""Every route of the API, as OpenAPI path items (see api/openapi_schemas.py for the shared schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from vip.api.openapi_schemas import (
    ADDRESS,
    CHARGE_UNAVAILABLE,
    RETRY_AFTER,
    TIMESTAMP,
    error_response,
    ok_response,
    operation,
    path_param,
    query_param,
    ref,
)
from vip.api.routes import (
    admin,
    funding_wallets,
    payments,
    platforms,
    sign_in_domains,
    users,
    wallet_connect,
    webhooks,
)
from vip.api.routes import dev as dev_routes
from vip.api.routes import events as event_routes
from vip.api.routes import test_clocks as test_clock_routes

USER_ID = {"type": "string", "minLength": 1, "maxLength": 100}  # the validators: 1-100 characters
ISO_DATE_OR_TIME = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"}  # YYYY-MM-DD, then optionally a time
CONNECTION_BODY = {"type": "object", "properties": {"connection": ref("Connection")},
                   "required": ["connection"]}

PATHS = {
    "/v1/health": {"get": operation("Readiness (also /readyz; /healthz is liveness only)", None, {
        "200": ok_response("The database and every enabled network's RPC answer",
                   {"type": "object", "properties": {"status": {"const": "ok"}, "time": {"type": "string"}},
                    "required": ["status", "time"]}),
        "503": error_response("Not ready: ERR_NOT_READY, details name each dependency that does not answer "
                              "(`database`, `rpc:<network>`)")}, tag="Service")},
    "/v1/users": {"post": operation("Create a user", "write", {
        "201": ok_response("The new user", {"type": "object", "properties": {"user": ref("User")},
                                    "required": ["user"]})}, errors=("409", "404", "422"),
        body=users.CreateUser,
        tag="Users")},
    "/v1/users/{user_id}": {"get": operation("Read a user", "read", {
        "200": ok_response("The user", {"type": "object", "properties": {"user": ref("User")},
                                "required": ["user"]})}, errors=("404",), parameters=[path_param("user_id")],
        tag="Users")},
    "/v1/api-keys": {
        "post": operation("Create an API key of the caller's organisation (its secret is shown once)",
                          "admin", {"201": ok_response("The new key with its secret", {
                              "type": "object", "properties": {"api_key": ref("ApiKey")},
                              "required": ["api_key"]})}, body=admin.CreateKey, tag="API keys"),
        "get": operation("List the organisation's API keys", "admin", {"200": ok_response(
            "Keys, without secrets", {
            "type": "object", "properties": {"api_keys": {"type": "array", "items": ref("ApiKey")}},
            "required": ["api_keys"]})}, tag="API keys"),
    },
    "/v1/api-keys/{key_id}": {"delete": operation("Revoke an API key", "admin", {
        "200": ok_response("The revoked key", {"type": "object", "properties": {"api_key": ref("ApiKey")},
                                       "required": ["api_key"]})}, errors=("404",),
        parameters=[path_param("key_id")], tag="API keys")},
}

PATHS.update({
    "/v1/connect/wallet/nonce": {"get": operation(
        "A single-use Sign-In with Ethereum nonce for a user (10 minutes)", "write", {
            "200": ok_response("Put the nonce and, word for word, the statement in the EIP-4361 message; "
                               "stamp Issued At with issued_at", {
                "type": "object", "properties": {"nonce": {"type": "string"}, "issued_at": TIMESTAMP,
                                                 "expires_at": TIMESTAMP, "statement": {
                                                     "type": "string", "description": "The only statement a "
                                                     "sign-in may carry (else 422 ERR_STATEMENT_MISMATCH)"},
                                                 "sign_in_domains": {
                                                     "type": "array", "items": ref("SignInSite"),
                                                     "description": "Where the message may be signed: its "
                                                     "domain must be one of these (else 422 "
                                                     "ERR_DOMAIN_MISMATCH) and its URI under one of that "
                                                     "domain's prefixes (else 422 ERR_URI_MISMATCH). The "
                                                     "organisation's sign-in domains; the service's own host "
                                                     "too on a development stack"}},
                "required": ["nonce", "issued_at", "expires_at", "statement", "sign_in_domains"]})},
        errors=("404",),
        parameters=[{"name": "X-User-Id", "in": "header", "required": True, "schema": USER_ID}],
        tag="Connections")},
    "/v1/connect/wallet": {"post": operation(
        "Connect a wallet with a signed EIP-4361 message (EOA or ERC-1271 contract wallet)", "write", {
            "201": ok_response("New wallet connection; its history is indexed", CONNECTION_BODY),
            "200": ok_response("The address was already connected for this user: the existing connection",
                       CONNECTION_BODY)}, errors=("404", "422", "502"), body=wallet_connect.ConnectWallet,
        tag="Connections")},
    "/v1/connect/platform/authorize": {"get": operation("Start connecting a platform by OAuth", "write", {
        "200": ok_response("Send the user to redirect_url (state single use, 10 minutes)", {
            "type": "object", "properties": {"redirect_url": {"type": "string"}, "expires_at": TIMESTAMP},
            "required": ["redirect_url", "expires_at"]})}, errors=("404",), tag="Connections",
        parameters=[query_param("platform", {"type": "string"}, True),
                    query_param("user_id", USER_ID, True)])},
    "/v1/connect/platform/callback": {"get": operation(
        "OAuth callback, reached by the user's browser (no API key; the state authenticates)", None, {
            "201": ok_response("New platform connection", CONNECTION_BODY),
            "200": ok_response("Account already connected: records replaced, no event", CONNECTION_BODY)},
        errors=("409", "502"), tag="Connections",
        parameters=[query_param(n, {"type": "string"})
                    for n in ("state", "code", "error", "error_description")])},
    "/v1/connect/platform/direct": {"post": operation("Push a platform account and its history", "write", {
        "201": ok_response("New platform connection", CONNECTION_BODY),
        "200": ok_response("Existing connection: records replaced, no event", CONNECTION_BODY)},
        errors=("404", "409"), body=platforms.DirectPlatformConnection, tag="Connections")},
    "/v1/connections": {"get": operation("A user's connections, newest first (revoked ones too)", "read", {
        "200": ok_response("Connections", {"type": "object", "properties": {
            "connections": {"type": "array", "items": ref("ConnectionListItem")}},
            "required": ["connections"]})}, errors=("404",),
        parameters=[query_param("user_id", USER_ID, True)], tag="Connections")},
    "/v1/connections/{connection_id}": {"delete": operation(
        "Revoke a connection (a revoked wallet stops counting as active)", "write", {
            "200": ok_response("The revoked connection", CONNECTION_BODY)}, errors=("404",),
        parameters=[path_param("connection_id")], tag="Connections")},
    "/v1/wallets": {"get": operation("A user's active wallets with balances as of the latest indexed block",
                                     "read", {"200": ok_response("Wallets", {"type": "object", "properties": {
                                         "wallets": {"type": "array", "items": ref("Wallet")}},
                                         "required": ["wallets"]})}, errors=("404",),
                                     parameters=[query_param("user_id", USER_ID, True),
                                                 query_param("network", {"type": "string", "minLength": 1})],
        tag="Wallets")},
    "/v1/transactions": {"get": operation(
        "A user's normalized, fraud-filtered USDC/USDT transactions, newest first", "read", {
            "200": ok_response("A page of transactions", {"type": "object", "properties": {
                "transactions": {"type": "array", "items": ref("Transaction")},
                "pagination": ref("Pagination")}, "required": ["transactions", "pagination"]})},
        errors=("404",), tag="Wallets", parameters=[
            query_param("user_id", USER_ID, True),
            query_param("wallet_id", {"type": "string", "minLength": 1}),
            query_param("direction", {"enum": ["inbound", "outbound"]}),
            query_param("classification", {"enum": ["verified_income", "p2p", "dex_trade", "unknown",
                                               "wash_trade", "circular"]},
                   description="wash_trade and circular only with include_filtered=true"),
            query_param("token", {"enum": ["USDC", "USDT"]}),
            query_param("from_date", ISO_DATE_OR_TIME, description="ISO 8601 date or date-time"),
            query_param("to_date", ISO_DATE_OR_TIME, description="ISO 8601 date or date-time"),
            query_param("include_filtered", {"type": "boolean"}),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 200}),
            query_param("cursor", {"type": "string", "minLength": 1, "maxLength": 400},
                        description="pagination.cursor of the previous page"),
        ])},
})

# --- disbursement
INTENT_BODY = {"type": "object", "properties": {"payment_intent": ref("PaymentIntent")},
               "required": ["payment_intent"]}
CHARGE_BODY = {"type": "object", "properties": {"charge": ref("Charge")}, "required": ["charge"]}
PATHS.update({
    "/v1/payment-intents": {"post": operation(
        "Stage a disbursement from a registered funding wallet of the organisation: returns the approve() "
        "call (spender: the organisation's own spender) the funding wallet must make", "disburse", {
            "201": ok_response(
                "The intent, pending_approval; it expires after 30 minutes (configurable) unless "
                       "approved. Fires payment_intent.created", INTENT_BODY)},
        errors=("404", "422"), body=payments.CreatePaymentIntent, tag="Disbursement")},
    "/v1/payment-intents/{intent_id}": {"get": operation("Read a payment intent", "read", {
        "200": ok_response("The intent", INTENT_BODY)}, errors=("404",), parameters=[path_param("intent_id")],
        tag="Disbursement")},
    "/v1/charges": {"post": operation(
        "Charge a confirmed payment intent, at most once per intent. The API records the charge and the "
        "disbursement daemon (which alone holds the operator key) calls disburse(); the request waits up "
        "to the configured `charge_wait_s` for it to settle", "disburse", {
            "201": ok_response(
                "Settled within the wait: succeeded (charge.succeeded) or failed (charge.failed, see "
                "failure_code)", CHARGE_BODY),
            "202": ok_response("Accepted, processed asynchronously: still pending after the wait; follow it "
                               "with GET /v1/charges/{id} or the charge.succeeded / charge.failed webhooks",
                               CHARGE_BODY),
            "503": error_response(CHARGE_UNAVAILABLE, RETRY_AFTER)},
        errors=("404", "409", "410", "422"), body=payments.CreateCharge, tag="Disbursement")},
    "/v1/charges/{charge_id}": {"get": operation("Read a charge", "read", {
        "200": ok_response("The charge", CHARGE_BODY)}, errors=("404",), parameters=[path_param("charge_id")],
        tag="Disbursement")},
})

ADDRESS_PARAM = {**path_param("address"), "schema": ADDRESS,
                 "description": "The wallet's address, in any letter case"}
FUNDING_WALLET_BODY = {"type": "object", "properties": {"funding_wallet": ref("FundingWallet")},
                       "required": ["funding_wallet"]}
PATHS.update({
    "/v1/funding-wallets/nonce": {"post": operation(
        "A single-use challenge (10 minutes) to register a funding wallet: the message it must sign",
        "disburse", {
            "201": ok_response("Have the wallet sign `message` byte for byte (EIP-191 personal_sign)", {
                "type": "object", "properties": {"nonce": {"type": "string"}, "message": {"type": "string"},
                                                 "expires_at": TIMESTAMP},
                "required": ["nonce", "message", "expires_at"]})},
        body=funding_wallets.FundingWalletNonce, tag="Disbursement")},
    "/v1/funding-wallets": {
        "post": operation(
            "Register a funding wallet to the caller's organisation with the wallet's signature (EOA or "
            "ERC-1271 contract wallet); an address belongs to at most one organisation", "disburse", {
                "201": ok_response("Registered: payment intents of this organisation may name it",
                                   FUNDING_WALLET_BODY),
                "200": ok_response("Already registered to this organisation", FUNDING_WALLET_BODY)},
            errors=("409", "422", "502"), body=funding_wallets.RegisterFundingWallet, tag="Disbursement"),
        "get": operation("List the organisation's funding wallets", "read", {
            "200": ok_response("Registered funding wallets, oldest first", {
                "type": "object", "properties": {"funding_wallets": {"type": "array",
                                                                     "items": ref("FundingWallet")}},
                "required": ["funding_wallets"]})}, tag="Disbursement"),
    },
    "/v1/funding-wallets/{address}": {"delete": operation(
        "Remove a funding wallet of the organisation (and its default mark); refused with 409 "
        "ERR_FUNDING_WALLET_IN_USE while an open payment intent of the organisation (pending_approval or "
        "approval_confirmed) names it", "disburse", {
            "200": ok_response("The removed registration", FUNDING_WALLET_BODY)},
        errors=("404", "409"), parameters=[ADDRESS_PARAM], tag="Disbursement")},
    "/v1/funding-wallets/{address}/default": {"put": operation(
        "Make a registered funding wallet the organisation's default: payment intents that name no "
        "funding_wallet use it", "disburse", {
            "200": ok_response("The new default", FUNDING_WALLET_BODY)},
        errors=("404",), parameters=[ADDRESS_PARAM], tag="Disbursement")},
})

SIGN_IN_DOMAIN_BODY = {"type": "object", "properties": {"sign_in_domain": ref("SignInDomain")},
                       "required": ["sign_in_domain"]}
PATHS.update({
    "/v1/sign-in-domains": {
        "post": operation(
            "Register a site the organisation's borrowers sign in on (or replace its URI prefixes): a "
            "Sign-In with Ethereum message is accepted only when its domain is one of the organisation's",
            "admin", {
                "201": ok_response("Registered", SIGN_IN_DOMAIN_BODY),
                "200": ok_response("Already registered: its URI prefixes replaced", SIGN_IN_DOMAIN_BODY)},
            body=sign_in_domains.RegisterSignInDomain, tag="Connections"),
        "get": operation("List the organisation's sign-in domains", "admin", {
            "200": ok_response("Sign-in domains, by name", {
                "type": "object", "properties": {"sign_in_domains": {"type": "array",
                                                                     "items": ref("SignInDomain")}},
                "required": ["sign_in_domains"]})}, tag="Connections"),
    },
    "/v1/sign-in-domains/{domain}": {"delete": operation(
        "Remove a sign-in domain: messages naming it are refused from then on", "admin", {
            "200": ok_response("The removed domain", SIGN_IN_DOMAIN_BODY)},
        errors=("404",), parameters=[path_param("domain")], tag="Connections")},
})

BODY_MODELS: list[type[BaseModel]] = [users.CreateUser, admin.CreateKey, sign_in_domains.RegisterSignInDomain,
               wallet_connect.ConnectWallet, platforms.DirectPlatformConnection, payments.CreatePaymentIntent,
               payments.CreateCharge,
               funding_wallets.FundingWalletNonce, funding_wallets.RegisterFundingWallet]

# --- dev: integrators' test clock ----------------------------------------------------------------------
CHAIN_HEAD = {"type": "object", "properties": {
    "block_number": {"type": "integer"}, "timestamp": TIMESTAMP, "unix_timestamp": {"type": "integer"}},
    "required": ["block_number", "timestamp", "unix_timestamp"]}
PATHS["/v1/dev/time-travel"] = {"post": operation(
    "Move a local network's time forward and mine blocks (a test clock; local networks only)", "admin", {
        "200": ok_response("The head before and after", {"type": "object", "properties": {
            "network": {"type": "string"}, "previous": CHAIN_HEAD, "head": CHAIN_HEAD,
            "advanced_seconds": {"type": "integer"}, "blocks_mined": {"type": "integer"}},
            "required": ["network", "previous", "head", "advanced_seconds", "blocks_mined"]})},
    errors=("422", "502"), body=dev_routes.TimeTravelRequest, tag="Development")}
PATHS["/v1/dev/time-travel"]["post"]["description"] += (
    " Refused with 422 ERR_NETWORK_NOT_LOCAL on a network not marked `local = true` in the configuration"
    " (or without an RPC URL), and with 400 ERR_VALIDATION on an unknown network or a to_timestamp not"
    " after the head block's. The service's clock follows the first local network, so expiries and"
    " lookback windows move too.")
BODY_MODELS.append(dev_routes.TimeTravelRequest)

TEST_CLOCK_BODY = {"type": "object", "properties": {"test_clock": ref("TestClock")},
                   "required": ["test_clock"]}
_CLOCKS_NOTE = (" Development stacks only (a network marked `local = true`); elsewhere 422"
                " ERR_TEST_CLOCKS_UNAVAILABLE. A user created with `test_clock` gets its VIPs made at the"
                " clock's time, whatever the chain's time does.")
PATHS["/v1/test-clocks"] = {"post": operation(
    "Create a test clock, frozen at a time (default: now)", "write",
    {"201": ok_response("The new clock", TEST_CLOCK_BODY)}, errors=("422",),
    body=test_clock_routes.CreateTestClock, tag="Development")}
PATHS["/v1/test-clocks/{clock_id}"] = {"get": operation(
    "Read a test clock", "read", {"200": ok_response("The clock", TEST_CLOCK_BODY)}, errors=("404", "422"),
    parameters=[path_param("clock_id")], tag="Development")}
PATHS["/v1/test-clocks/{clock_id}/advance"] = {"post": operation(
    "Move a test clock forward", "write", {"200": ok_response("The clock at its new time", TEST_CLOCK_BODY)},
    errors=("404", "422"), parameters=[path_param("clock_id")], body=test_clock_routes.AdvanceTestClock,
    tag="Development")}
for _item in ("/v1/test-clocks", "/v1/test-clocks/{clock_id}", "/v1/test-clocks/{clock_id}/advance"):
    for _operation in PATHS[_item].values():
        _operation["description"] = _operation.get("description", "") + _CLOCKS_NOTE
BODY_MODELS += [test_clock_routes.CreateTestClock, test_clock_routes.AdvanceTestClock]

_PERSONA_EXPECTED = {"type": "object", "properties": {
    "status": {"enum": ["verified", "partially_verified", "unverified"]},
    "periods_verified": {"type": "integer"},
    "recommendation": {"type": ["string", "null"],
                       "description": "null: no verified period, so the risk score answers 422"},
    "fraud_flags": {"type": "array", "items": {"type": "string"}}},
    "required": ["status", "periods_verified", "recommendation", "fraud_flags"]}
_PERSONA: dict[str, Any] = {"type": "object", "properties": {
    "name": {"type": "string"}, "summary": {"type": "string"}, "expected": _PERSONA_EXPECTED},
    "required": ["name", "summary", "expected"]}
PATHS["/v1/dev/personas"] = {
    "get": operation("The personas: preset borrowers and the outcome each produces", "read", {
        "200": ok_response("The catalogue", {"type": "object", "properties": {
            "personas": {"type": "array", "items": _PERSONA}}, "required": ["personas"]})},
        errors=("422",), tag="Development"),
    "post": operation(
        "Make a preset borrower: six months of on-chain money and the payroll records, on a test clock",
        "write", {"201": ok_response("The persona's user, wallets and test clock", {
            "type": "object", "properties": {"persona": {**_PERSONA, "properties": {
                **_PERSONA["properties"], "user_id": {"type": "string"}, "test_clock": {"type": "string"},
                "frozen_time": TIMESTAMP,
                "wallets": {"type": "object", "additionalProperties": {"type": "string"}}},
                "required": [*_PERSONA["required"], "user_id", "test_clock", "frozen_time", "wallets"]}},
            "required": ["persona"]})},
        errors=("422", "502"), body=dev_routes.CreatePersona, tag="Development")}
for _operation in PATHS["/v1/dev/personas"].values():
    _operation["description"] = _operation.get("description", "") + (
        " Development stacks only; the chain's time moves about seven months forward per persona"
        " (docs/personas.md).")
BODY_MODELS.append(dev_routes.CreatePersona)

# --- verification: VIP report and risk score --------------------------------------------------------------
VIP_BODY = {"type": "object", "properties": {"vip_report": ref("VipReport")}, "required": ["vip_report"]}
PATHS.update({
    "/v1/vip-report": {"get": operation(
        "The user's Verified Income Profile (made by the daemon, cached 24 hours per lookback)", "read", {
            "200": ok_response("A finished VIP (verified, partially_verified, unverified or error)",
                               VIP_BODY),
            "202": ok_response(
                "Generation in progress (status pending): poll again after 30 s or await the webhook",
                       VIP_BODY)},
        errors=("404", "422", "502"), tag="Verification", parameters=[
            query_param("user_id", USER_ID, True),
            query_param("refresh", {"type": "boolean"}, description=(
                "true: pull the user's OAuth-connected platforms again (502 ERR_PLATFORM_SYNC_FAILED, "
                "nothing changed, when a pull fails), then run the whole pipeline again")),
            query_param("lookback_months", {"type": "integer", "minimum": 1, "maximum": 12},
                   description="Complete months before the current one (default 6)"),
        ])},
    "/v1/risk-score": {"get": operation(
        "The four-pillar risk score of a VIP (computed once per VIP, then stored)", "read", {
            "200": ok_response("The score", {"type": "object", "properties": {"risk_score": ref("RiskScore")},
                                     "required": ["risk_score"]})},
        errors=("404", "422"), tag="Verification", parameters=[
            query_param("user_id", USER_ID, True),
            query_param("vip_id", {"type": "string", "minLength": 1},
                        description="Default: the most recent finished VIP"),
        ])},
})

# --- webhooks: endpoints, events, replay -------------------------------------------------------------------
ENDPOINT_BODY = {"type": "object", "properties": {"webhook_endpoint": ref("WebhookEndpoint")},
                 "required": ["webhook_endpoint"]}
EVENT_DETAIL_BODY = {"type": "object", "properties": {"event": ref("EventDetail")}, "required": ["event"]}
SSE_EVENT = {"type": "object", "description": "One Server-Sent Event of the stream", "properties": {
    "event": {"enum": ["ready", "event", "error"]}, "id": {"type": "string"},
    "data": {"type": "string", "description": "A JSON text: see the response's description"},
    "retry": {"type": "integer"}}, "required": ["data"]}
STREAM_EXAMPLE = (
    'event: ready\ndata: {"secret":"whsec_2c7Jq9dVbN4mT8xR1zL5wK0pF6hS3yA","organisation_id":'
    '"org_1f3a5c7e9b2d4f6a8c0e1b3d"}\n\n: keep-alive\n\nid: evt_0423bdf0e5684b9dbddb0740e18aa0d4\n'
    'event: event\ndata: {"id":"evt_0423bdf0e5684b9dbddb0740e18aa0d4","type":"charge.succeeded",'
    '"created_at":"2027-03-02T12:04:12Z","api_version":"v1","data":{"object":{"id":'
    '"ch_ff768881e7d7254ad2b6224e","status":"succeeded"}}}\n\n')
PATHS.update({
    "/v1/webhook-endpoints": {
        "post": operation(
            "Register a webhook endpoint (its signing secret is shown once)", "admin", {
                "201": ok_response("The new endpoint with its secret", ENDPOINT_BODY)},
            body=webhooks.CreateWebhookEndpoint, tag="Webhooks"),
        "get": operation("The organisation's webhook endpoints", "admin", {"200": ok_response(
            "Endpoints, without secrets", {"type": "object", "properties": {
                "webhook_endpoints": {"type": "array", "items": ref("WebhookEndpoint")}},
                "required": ["webhook_endpoints"]})}, tag="Webhooks"),
    },
    "/v1/webhook-endpoints/{endpoint_id}": {"delete": operation(
        "Delete a webhook endpoint: nothing more is sent to it; its pending deliveries are cancelled",
        "admin", {"200": ok_response("The deleted endpoint", ENDPOINT_BODY)}, errors=("404",),
        parameters=[path_param("endpoint_id")], tag="Webhooks")},
    "/v1/webhook-endpoints/{endpoint_id}/enable": {"post": operation(
        "Deliver to an endpoint disabled for failing again (events of the disabled time only by replay)",
        "admin", {"200": ok_response("The enabled endpoint", ENDPOINT_BODY)}, errors=("404",),
        parameters=[path_param("endpoint_id")], tag="Webhooks")},
    "/v1/webhook-endpoints/{endpoint_id}/rotate-secret": {"post": operation(
        "Issue a new signing secret; the previous one keeps signing until previous_secret_expires_at",
        "admin", {"200": ok_response("The endpoint with its new secret (shown once)", ENDPOINT_BODY)},
        errors=("404", "409"), parameters=[path_param("endpoint_id")], tag="Webhooks")},
    "/v1/events": {"get": operation(
        "The organisation's events, newest first, with their delivery status", "admin", {
            "200": ok_response("A page of events", {"type": "object", "properties": {
                "events": {"type": "array", "items": ref("Event")}, "pagination": ref("Pagination")},
                "required": ["events", "pagination"]})}, tag="Webhooks", parameters=[
            query_param("type", {"type": "string", "minLength": 1, "maxLength": 100},
                        description="Only events of this type"),
            query_param("created_from", TIMESTAMP, description="created_at at or after (UTC if no offset)"),
            query_param("created_to", TIMESTAMP, description="created_at before (UTC if no offset)"),
            query_param("delivery_status", {"enum": ["pending", "delivered", "failed", "none"]}),
            query_param("limit", {"type": "integer", "minimum": 1, "maximum": 200}, description="default 50"),
            query_param("cursor", {"type": "string", "minLength": 1, "maxLength": 100},
                        description="pagination.cursor of the previous page"),
        ])},
    "/v1/events/{event_id}": {"get": operation(
        "An event with its deliveries and every attempt", "admin", {
            "200": ok_response("The event", EVENT_DETAIL_BODY)}, errors=("404",),
        parameters=[path_param("event_id")],
        tag="Webhooks")},
    "/v1/events/{event_id}/replay": {"post": operation(
        "Deliver an event again to every endpoint subscribed to its type, or only to `endpoint_id` (a "
        "failed or delivered delivery starts a new round of the retry schedule). The body is optional",
        "admin", {"202": ok_response("Queued: the event with its deliveries", EVENT_DETAIL_BODY)},
        errors=("404", "409", "422"), parameters=[path_param("event_id")], body=event_routes.ReplayEvent,
        tag="Webhooks")},
    "/v1/events/trigger": {"post": operation(
        "Fire a test event of a type: its sample object (docs/webhooks.md), marked `data.test: true`, "
        "delivered to the subscribed endpoints and to `vip listen`", "admin", {
            "201": ok_response("The test event", {"type": "object", "properties": {"event": ref("Event")},
                                                  "required": ["event"]})},
        body=event_routes.TriggerEvent, tag="Webhooks")},
    "/v1/events/stream": {"get": operation(
        "The organisation's events as they commit, as Server-Sent Events (what `vip listen` reads)",
        "admin", {"200": {"description": (
            "text/event-stream: first `event: ready` with `data: {\"secret\", \"organisation_id\"}` (a "
            "signing secret for this session), then per event `id: <event id>`, `event: event` and "
            "`data:` the delivery body exactly as a webhook carries it; `: keep-alive` comments while "
            "quiet; `event: error` (`data: {\"code\", \"message\"}`) ends it when the key is revoked. "
            "Events committed before the stream opened are not sent. On the wire:\n\n```\n"
            + STREAM_EXAMPLE + "```"),
            # The schema of one event of the stream (what SSE-aware clients and checkers read per event).
            "content": {"text/event-stream": {"schema": SSE_EVENT, "example": {
                "event": "ready", "data": STREAM_EXAMPLE.split("\n", 2)[1].removeprefix("data: ")}}}}},
        tag="Webhooks")},
})
PATHS["/v1/events/{event_id}/replay"]["post"]["requestBody"]["required"] = False
BODY_MODELS.extend([webhooks.CreateWebhookEndpoint, event_routes.ReplayEvent, event_routes.TriggerEvent])
