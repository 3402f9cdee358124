"""Every route of the API, as OpenAPI path items (see api/openapi.py for the shared schemas)."""

from __future__ import annotations

from api.openapi import TIMESTAMP, _ok, _path, _query, operation, ref
from api.routes import admin, platforms, users, wallet_connect, webhooks

USER_ID = {"type": "string", "minLength": 1}
CONNECTION_BODY = {"type": "object", "properties": {"connection": ref("Connection")},
                   "required": ["connection"]}

PATHS = {
    "/v1/health": {"get": operation("Liveness and readiness", None, {
        "200": _ok("The service and its database answer",
                   {"type": "object", "properties": {"status": {"const": "ok"}, "time": {"type": "string"}},
                    "required": ["status", "time"]})}, tag="Service")},
    "/v1/users": {"post": operation("Create a user", "write", {
        "201": _ok("The new user", {"type": "object", "properties": {"user": ref("User")},
                                    "required": ["user"]})}, errors=("409",), body=users.CreateUser,
        tag="Users")},
    "/v1/users/{user_id}": {"get": operation("Read a user", "read", {
        "200": _ok("The user", {"type": "object", "properties": {"user": ref("User")},
                                "required": ["user"]})}, errors=("404",), parameters=[_path("user_id")],
        tag="Users")},
    "/v1/api-keys": {
        "post": operation("Create an API key of the caller's organisation (its secret is shown once)",
                          "admin", {"201": _ok("The new key with its secret", {
                              "type": "object", "properties": {"api_key": ref("ApiKey")},
                              "required": ["api_key"]})}, body=admin.CreateKey, tag="API keys"),
        "get": operation("List the organisation's API keys", "admin", {"200": _ok("Keys, without secrets", {
            "type": "object", "properties": {"api_keys": {"type": "array", "items": ref("ApiKey")}},
            "required": ["api_keys"]})}, tag="API keys"),
    },
    "/v1/api-keys/{key_id}": {"delete": operation("Revoke an API key", "admin", {
        "200": _ok("The revoked key", {"type": "object", "properties": {"api_key": ref("ApiKey")},
                                       "required": ["api_key"]})}, errors=("404",),
        parameters=[_path("key_id")], tag="API keys")},
}

PATHS.update({
    "/v1/connect/wallet/nonce": {"get": operation(
        "A single-use Sign-In with Ethereum nonce for a user (10 minutes)", "write", {
            "200": _ok("Put the nonce in the EIP-4361 message; stamp Issued At with issued_at", {
                "type": "object", "properties": {"nonce": {"type": "string"}, "issued_at": TIMESTAMP,
                                                 "expires_at": TIMESTAMP},
                "required": ["nonce", "issued_at", "expires_at"]})}, errors=("404",),
        parameters=[{"name": "X-User-Id", "in": "header", "required": True, "schema": USER_ID}],
        tag="Connections")},
    "/v1/connect/wallet": {"post": operation(
        "Connect a wallet with a signed EIP-4361 message (EOA or ERC-1271 contract wallet)", "write", {
            "201": _ok("New wallet connection; its history is indexed", CONNECTION_BODY),
            "200": _ok("The address was already connected for this user: the existing connection",
                       CONNECTION_BODY)}, errors=("404", "422", "502"), body=wallet_connect.ConnectWallet,
        tag="Connections")},
    "/v1/connect/platform/authorize": {"get": operation("Start connecting a platform by OAuth", "write", {
        "200": _ok("Send the user to redirect_url (state single use, 10 minutes)", {
            "type": "object", "properties": {"redirect_url": {"type": "string"}, "expires_at": TIMESTAMP},
            "required": ["redirect_url", "expires_at"]})}, errors=("404",), tag="Connections",
        parameters=[_query("platform", {"type": "string"}, True), _query("user_id", USER_ID, True)])},
    "/v1/connect/platform/callback": {"get": operation(
        "OAuth callback, reached by the user's browser (no API key; the state authenticates)", None, {
            "201": _ok("New platform connection", CONNECTION_BODY),
            "200": _ok("Account already connected: records replaced, no event", CONNECTION_BODY)},
        errors=("409", "502"), tag="Connections",
        parameters=[_query(n, {"type": "string"}) for n in ("state", "code", "error", "error_description")])},
    "/v1/connect/platform/direct": {"post": operation("Push a platform account and its history", "write", {
        "201": _ok("New platform connection", CONNECTION_BODY),
        "200": _ok("Existing connection: records replaced, no event", CONNECTION_BODY)},
        errors=("404", "409"), body=platforms.DirectPlatformConnection, tag="Connections")},
    "/v1/connections": {"get": operation("A user's connections, newest first (revoked ones too)", "read", {
        "200": _ok("Connections", {"type": "object", "properties": {
            "connections": {"type": "array", "items": ref("ConnectionListItem")}},
            "required": ["connections"]})}, errors=("404",),
        parameters=[_query("user_id", USER_ID, True)], tag="Connections")},
    "/v1/connections/{connection_id}": {"delete": operation(
        "Revoke a connection (a revoked wallet stops counting as active)", "write", {
            "200": _ok("The revoked connection", CONNECTION_BODY)}, errors=("404",),
        parameters=[_path("connection_id")], tag="Connections")},
    "/v1/wallets": {"get": operation("A user's active wallets with balances as of the latest indexed block",
                                     "read", {"200": _ok("Wallets", {"type": "object", "properties": {
                                         "wallets": {"type": "array", "items": ref("Wallet")}},
                                         "required": ["wallets"]})}, errors=("404",),
                                     parameters=[_query("user_id", USER_ID, True),
                                                 _query("network", {"type": "string"})], tag="Wallets")},
    "/v1/transactions": {"get": operation(
        "A user's normalized, fraud-filtered USDC/USDT transactions, newest first", "read", {
            "200": _ok("A page of transactions", {"type": "object", "properties": {
                "transactions": {"type": "array", "items": ref("Transaction")},
                "pagination": ref("Pagination")}, "required": ["transactions", "pagination"]})},
        errors=("404",), tag="Wallets", parameters=[
            _query("user_id", USER_ID, True),
            _query("wallet_id", {"type": "string"}),
            _query("direction", {"enum": ["inbound", "outbound"]}),
            _query("classification", {"enum": ["verified_income", "p2p", "dex_trade", "unknown",
                                               "wash_trade", "circular"]},
                   description="wash_trade and circular only with include_filtered=true"),
            _query("token", {"enum": ["USDC", "USDT"]}),
            _query("from_date", {"type": "string"}, description="ISO 8601 date or date-time"),
            _query("to_date", {"type": "string"}, description="ISO 8601 date or date-time"),
            _query("include_filtered", {"type": "boolean"}),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": 200}),
            _query("cursor", {"type": "string"}, description="pagination.cursor of the previous page"),
        ])},
})

BODY_MODELS = [users.CreateUser, admin.CreateKey, wallet_connect.ConnectWallet,
               platforms.DirectPlatformConnection]

# --- webhooks (issue 6) ---
ENDPOINT_BODY = {"type": "object", "properties": {"webhook_endpoint": ref("WebhookEndpoint")},
                 "required": ["webhook_endpoint"]}
EVENT_DETAIL_BODY = {"type": "object", "properties": {"event": ref("EventDetail")}, "required": ["event"]}
PATHS.update({
    "/v1/webhook-endpoints": {
        "post": operation(
            "Register a webhook endpoint (its signing secret is shown once)", "admin", {
                "201": _ok("The new endpoint with its secret", ENDPOINT_BODY)},
            body=webhooks.CreateWebhookEndpoint, tag="Webhooks"),
        "get": operation("The organisation's webhook endpoints", "admin", {"200": _ok(
            "Endpoints, without secrets", {"type": "object", "properties": {
                "webhook_endpoints": {"type": "array", "items": ref("WebhookEndpoint")}},
                "required": ["webhook_endpoints"]})}, tag="Webhooks"),
    },
    "/v1/webhook-endpoints/{endpoint_id}": {"delete": operation(
        "Delete a webhook endpoint: nothing more is sent to it; its pending deliveries are cancelled",
        "admin", {"200": _ok("The deleted endpoint", ENDPOINT_BODY)}, errors=("404",),
        parameters=[_path("endpoint_id")], tag="Webhooks")},
    "/v1/webhook-endpoints/{endpoint_id}/rotate-secret": {"post": operation(
        "Issue a new signing secret; the previous one keeps signing until previous_secret_expires_at",
        "admin", {"200": _ok("The endpoint with its new secret (shown once)", ENDPOINT_BODY)},
        errors=("404", "409"), parameters=[_path("endpoint_id")], tag="Webhooks")},
    "/v1/events": {"get": operation(
        "The organisation's events, newest first, with their delivery status", "admin", {
            "200": _ok("A page of events", {"type": "object", "properties": {
                "events": {"type": "array", "items": ref("Event")}, "pagination": ref("Pagination")},
                "required": ["events", "pagination"]})}, tag="Webhooks", parameters=[
            _query("type", {"type": "string"}, description="Only events of this type"),
            _query("created_from", TIMESTAMP, description="created_at at or after (UTC if no offset)"),
            _query("created_to", TIMESTAMP, description="created_at before (UTC if no offset)"),
            _query("delivery_status", {"enum": ["pending", "delivered", "failed", "none"]}),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": 200}, description="default 50"),
            _query("cursor", {"type": "string"}, description="pagination.cursor of the previous page"),
        ])},
    "/v1/events/{event_id}": {"get": operation(
        "An event with its deliveries and every attempt", "admin", {
            "200": _ok("The event", EVENT_DETAIL_BODY)}, errors=("404",), parameters=[_path("event_id")],
        tag="Webhooks")},
    "/v1/events/{event_id}/replay": {"post": operation(
        "Deliver an event again to every endpoint subscribed to its type (a failed or delivered delivery "
        "starts a new round of the retry schedule)", "admin", {
            "202": _ok("Queued: the event with its deliveries", EVENT_DETAIL_BODY)},
        errors=("404", "409", "422"), parameters=[_path("event_id")], tag="Webhooks")},
})
BODY_MODELS.append(webhooks.CreateWebhookEndpoint)
