"""The OpenAPI document's building blocks: response schemas (checked against real responses by the tests),
the error and rate-limit parts every operation shares, and the helpers that write an operation."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

API_VERSION = "1.0.0"

ID = {"type": "string"}
TIMESTAMP = {"type": "string", "format": "date-time"}
NULLABLE_TIMESTAMP = {"type": ["string", "null"], "format": "date-time"}
ADDRESS = {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "EIP-55 checksummed"}
NUMBER = {"type": "number"}


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, **extra}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


# A failed charge's failure_code (vip.payments.failures), with what the lender can do about it.
FAILURE_CODES = {
    "ERR_RECIPIENT_BLACKLISTED": "the token's issuer blacklisted the borrower's wallet; it cannot receive",
    "ERR_FUNDING_WALLET_BLACKLISTED": "the token's issuer blacklisted the funding wallet; nothing moves "
                                      "from it",
    "ERR_TOKEN_PAUSED": "the token's issuer paused every transfer; retry with a new intent once unpaused",
    "ERR_INSUFFICIENT_BALANCE": "the funding wallet holds less than the amount; fund it",
    "ERR_INSUFFICIENT_ALLOWANCE": "the funding wallet's allowance to the spender is below the amount "
                                  "(revoked, lowered or spent); approve again",
    "ERR_TOKEN_TRANSFER_FEE": "the token takes a fee on transfers, so the borrower would not receive the "
                              "full amount; nothing is paid",
    "ERR_DISBURSEMENT_REJECTED": "another refusal before anything was sent (failure_message says which)",
    "ERR_DISBURSEMENT_REVERTED": "the transaction was mined and reverted for another reason",
}

SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": obj({
        "code": {"type": "string", "description": "Stable machine-readable code, e.g. ERR_VALIDATION"},
        "message": {"type": "string"},
        "details": {"type": "object", "description": "Depends on the error; for validation errors, the "
                                                     "offending fields and what is wrong with each"},
        "request_id": {"type": "string"},
    })}),
    "User": obj({"id": ID, "external_id": {"type": ["string", "null"]}, "metadata": {"type": "object"},
                 "created_at": TIMESTAMP,
                 "test_clock": {"type": "string", "description": "Development stacks only: the user's test "
                                                                  "clock, when it was created on one"}},
                required=["id", "external_id", "metadata", "created_at"]),
    "TestClock": obj({"id": ID, "name": {"type": ["string", "null"]}, "frozen_time": TIMESTAMP,
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
    # --- disbursement
    "PaymentIntent": obj({
        "id": ID,
        "status": {"enum": ["pending_approval", "approval_confirmed", "expired", "succeeded", "failed"]},
        "user_id": ID, "amount_usd": NUMBER, "token": {"enum": ["USDC", "USDT"]},
        "network": {"type": "string"}, "recipient_wallet": ADDRESS, "funding_wallet": ADDRESS,
        "contract_address": {**ADDRESS, "description": "The organisation's own spender under the "
                             "disbursement contract: the address the funding wallet approves"},
        "approval_calldata": obj({
            "function": {"const": "approve"}, "spender": ADDRESS,
            "amount": {"type": "string", "pattern": r"^[0-9]+$",
                       "description": "Token base units (10^6 per USD for USDC and USDT): the total "
                                      "allowance the funding wallet must give the spender, this intent's "
                                      "amount plus every other open intent of the same funding wallet and "
                                      "token (an allowance is one number, approve() sets it), so that "
                                      "following it never lowers another intent's cover"},
            "token_contract": ADDRESS,
            "reset_calldata": obj({
                "function": {"const": "approve"}, "spender": ADDRESS, "amount": {"const": "0"},
                "token_contract": ADDRESS},
                description="Present only for a USDT intent created while the funding wallet's allowance "
                            "to the spender was not zero: USDT refuses to change a non-zero allowance to "
                            "another non-zero one, so send this approve(spender, 0) first, then the "
                            "approve above. A charge of another intent that finds the allowance at 0 "
                            "meanwhile waits for that approve rather than failing"),
        }, required=["function", "spender", "amount", "token_contract"]),
        "approval_tx_hash": {"type": ["string", "null"],
                             "description": "The Approval whose allowance covers the intent (the last one "
                                            "at or below the final block when it was confirmed); null "
                                            "before confirmation, or when the allowance stood before any "
                                            "indexed Approval"},
        "approval_coverage": {"enum": ["approval", "standing_allowance", None],
                              "description": "How the confirmed intent is covered: by an Approval mined "
                                             "after it was created, or by an allowance that stood before "
                                             "it; null until confirmed"},
        "metadata": {"type": "object"}, "expires_at": TIMESTAMP, "created_at": TIMESTAMP,
    }),
    "Charge": obj({
        "id": ID, "payment_intent_id": ID,
        "status": {"enum": ["pending", "succeeded", "failed"]},
        "amount_usd": NUMBER, "token": {"enum": ["USDC", "USDT"]}, "network": {"type": "string"},
        "disbursement_tx_hash": {"type": ["string", "null"],
                                 "description": "The disburse() transaction (set when mined)"},
        "recipient_wallet": ADDRESS, "approval_tx_hash": {"type": "string"},
        "executed_at": NULLABLE_TIMESTAMP,
        "failure_code": {"enum": [*FAILURE_CODES, None],
                         "description": "Why the charge failed: " + "; ".join(
                             f"{code}: {text}" for code, text in FAILURE_CODES.items())},
        "failure_message": {"type": ["string", "null"]}, "created_at": TIMESTAMP,
    }),
    "FundingWallet": obj({
        "address": ADDRESS,
        "network": {"type": "string", "description": "Where the proof of control was checked"},
        "kind": {"enum": ["eoa", "contract"],
                 "description": "eoa: a key's EIP-191 signature; contract: the wallet's ERC-1271 check"},
        "registered_at": TIMESTAMP,
        "default": {"type": "boolean", "description": "The organisation's default funding wallet: what a "
                                                      "payment intent naming none uses"},
    }),
}

SCHEMAS.update({
    "SignInSite": obj({
        "domain": {"type": "string", "description": "The EIP-4361 domain (host, or host:port)"},
        "uri_prefixes": {"type": "array", "items": {"type": "string"},
                         "description": "A message's URI must start with one of these"},
    }),
    "SignInDomain": obj({
        "domain": {"type": "string", "description": "The EIP-4361 domain (host, or host:port)"},
        "uri_prefixes": {"type": "array", "items": {"type": "string"},
                         "description": "A message's URI must start with one of these"},
        "created_at": TIMESTAMP, "updated_at": TIMESTAMP,
    }),
})

# --- webhooks (issue 6) ---
_EVENT_TYPES = {"type": "string", "description": "See docs/webhooks.md for the catalogue"}
SCHEMAS.update({
    "WebhookEndpoint": obj({
        "id": ID, "url": {"type": "string"}, "description": {"type": ["string", "null"]},
        "event_types": {"type": "array", "items": _EVENT_TYPES, "description": "[\"*\"]: every type"},
        "status": {"enum": ["enabled", "disabled", "deleted"],
                   "description": "disabled: every attempt failed for webhooks.disable_after_days (3 days); "
                                  "nothing is sent until it is enabled again"},
        "created_at": TIMESTAMP,
        "previous_secret_expires_at": {**NULLABLE_TIMESTAMP, "description": "Until then the secret before "
                                       "the last rotation also signs (a second Service-Signature header)"},
        "deleted_at": NULLABLE_TIMESTAMP,
        "disabled_at": NULLABLE_TIMESTAMP,
        "disabled_reason": {"type": ["string", "null"], "description": "Why it was disabled"},
        "secret": {"type": "string", "description": "Signing secret, only in the create and rotate-secret "
                                                    "responses; shown once"},
    }, required=["id", "url", "description", "event_types", "status", "created_at",
                 "previous_secret_expires_at", "deleted_at", "disabled_at", "disabled_reason"]),
    "Event": obj({
        "id": ID, "type": _EVENT_TYPES, "created_at": TIMESTAMP, "api_version": {"const": "v1"},
        "data": obj({"object": {"type": "object", "description": "The resource, in its API schema"},
                     "test": {"const": True, "description": "Only on test events (POST "
                              "/v1/events/trigger, `vip trigger`): a sample object, no real change"}},
                    required=["object"]),
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
    "410": "Gone: ERR_PAYMENT_INTENT_EXPIRED",
    "503": "Temporarily unavailable, retry after Retry-After seconds: ERR_NOT_READY (the database does not "
           "answer)",
}
# POST /v1/charges answers 503 for one more reason.
CHARGE_UNAVAILABLE = ("Temporarily unavailable: ERR_NOT_READY (the database does not answer; retry after "
                      "Retry-After seconds), or ERR_DISBURSEMENT_UNAVAILABLE (no disbursement daemon with "
                      "the operator key is running for the intent's network)")
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"},
                               "description": "Seconds to wait before retrying (ERR_NOT_READY)"}}


def error_response(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "headers": {**RATE_HEADERS, **(headers or {})},
            "content": {"application/json": {"schema": ref("Error")}}}


def ok_response(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "headers": RATE_HEADERS,
            "content": {"application/json": {"schema": schema}}}


def query_param(name: str, schema: dict[str, Any], required: bool = False,
                description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def operation(summary: str, scope: str | None, responses: dict[str, Any], *, errors: tuple[str, ...] = (),
              parameters: list[dict[str, Any]] | None = None, body: type[BaseModel] | None = None,
              tag: str = "API") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "responses": dict(responses)}
    if body is not None:
        errors = ("409", *errors)  # an Idempotency-Key reused with another request
    if scope is None:
        op["security"] = []
    else:
        op["description"] = f"Requires an API key with the `{scope}` scope."
        errors = ("401", "403", *errors)
    for code in ("400", *errors, "429", "500", "503"):
        op["responses"].setdefault(code, error_response(ERRORS[code], RETRY_AFTER if code == "503" else None))
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": ref(body.__name__)}}}
        op.setdefault("parameters", []).append({
            "name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string",
                                                                                     "minLength": 1,
                                                                                     "maxLength": 255},
            "description": "Same key and body within 24 h: the first response again (if it was lost after "
                           "the resource was created, that resource); other body: 409"})
    return op


# --- verification: VIP report and risk score --------------------------------------------------------------
_USD = {"type": "number", "description": "USD, exact, at most 6 decimals"}
_NULLABLE_USD = {"type": ["number", "null"]}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_PERIOD = {"type": "string", "pattern": r"^\d{4}-\d{2}$"}
_REASON = obj({"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}},
              required=["code", "message"])
SCHEMAS.update({
    "VerifiedPeriod": obj({
        "period": _PERIOD, "expected_amount": _USD,
        "received_amount": {**_USD, "description": "the money that settled the period's records: the sum of "
                                                   "its transfers (a transfer that settled records of two "
                                                   "periods counts each record's amount in its period)"},
        "tx_hash": {"type": "string", "description": "the first transfer that settled the period's largest "
                                                     "record; every one is in `transfers`"},
        "transfers": {"type": "array", "minItems": 1, "description": (
            "every transfer that settled the period's records, in chain order: a payout record may be "
            "settled by several transfers of its payer within its date window (a batch, a second token, a "
            "fee split) and several records by one transfer; the match tiers apply to the sums. Absent "
            "in reports made before 2026-11"), "items": obj({
                "tx_hash": {"type": "string"}, "log_index": {"type": "integer"}, "amount_usd": _USD,
                "block_timestamp": TIMESTAMP, "origin_address": ADDRESS})},
        "payout_date": {"type": "string", "format": "date"}, "block_timestamp": TIMESTAMP,
        "origin_address": ADDRESS, "match_confidence": {"enum": ["exact", "close", "approximate"]},
        "verified": {"const": True}},
        required=["period", "expected_amount", "received_amount", "tx_hash", "payout_date", "block_timestamp",
                  "origin_address", "match_confidence", "verified"]),
    "UnverifiedPeriod": obj({
        "period": _PERIOD, "expected_amount": _USD, "received_amount": _USD, "verified": {"const": False},
        "reason_codes": {"type": "array", "items": {"type": "string"},
                         "description": "ERR_INCOME_MISMATCH, ERR_WASH_TRADE_DETECTED, ERR_CIRCULAR_FLOW, "
                                        "ERR_UNVERIFIED_SOURCE, ERR_INSUFFICIENT_HISTORY (no record)"},
        "reasons": {"type": "array", "items": _REASON,
                    "description": "ERR_INCOME_MISMATCH details: expected_amount, received_amount, "
                                   "tolerance_pct, actual_variance_pct (fractions)"}}),
    "FraudFlag": obj({
        "code": {"enum": ["ERR_WASH_TRADE_DETECTED", "ERR_CIRCULAR_FLOW"]},
        "fraud_type": {"enum": ["wash_trade", "circular"]}, "tx_hash": {"type": "string"},
        "log_index": {"type": "integer"}, "network": {"type": "string"}, "wallet_id": ID,
        "wallet_address": ADDRESS, "amount_usd": _USD, "block_timestamp": TIMESTAMP,
        "evidence": {"type": ["object", "null"], "description": (
            "The funding trace's evidence (null for the pass-through rule): rule `funding_trace`, "
            "inbound_tx_hash, self_funded_share (of the inbound transfer, 4 decimals), intermediaries, "
            "and path: the transfers of the largest contribution from the user's wallet to the inbound "
            "transfer (tx_hash, log_index, from_address, to_address, amount_usd, block_timestamp)"),
            "properties": {
                "rule": {"const": "funding_trace"}, "inbound_tx_hash": {"type": "string"},
                "self_funded_share": NUMBER, "intermediaries": {"type": "integer", "minimum": 1},
                "path": {"type": "array", "items": obj({
                    "tx_hash": {"type": "string"}, "log_index": {"type": "integer"},
                    "from_address": {"type": "string"}, "to_address": {"type": "string"},
                    "amount_usd": _USD, "block_timestamp": TIMESTAMP})}}}},
        required=["code", "fraud_type", "tx_hash", "log_index", "network", "wallet_id", "wallet_address",
                  "amount_usd", "block_timestamp"]),
    "FraudTrace": obj({
        "history_days": {"type": "integer", "description": "the trace read the history of the user's wallets "
                                                            "and of every address it followed from this many "
                                                            "days before the earliest income examined"},
        "history_from": {**NULLABLE_TIMESTAMP, "description": "where that history begins"},
        "window_days": {"type": "integer", "description": "reports made before 2026-11 only: the window the "
                                                          "trace then looked back from each transfer"},
        "max_hops": {"type": "integer"},
        "self_funded_share": {**NUMBER, "description": "an inbound transfer more than this share of which "
                                                       "the user's own wallets funded is self-funded"},
        "transfers_traced": {"type": "integer", "description": "inbound transfers whose funding was traced"},
        "self_funded": {"type": "integer", "description": "of them, flagged self-funded"},
        "fetch_cap_hit": {"type": "boolean", "description": "the addresses to fetch for the trace exceeded "
                                                            "the per-VIP cap (funding_trace.max_addresses)"},
        "untraced_count": {"type": "integer"},
        "untraced": {"type": "array", "description": "addresses the trace met whose history was not "
                                                     "fetched (the cap, or a fetch not done in time); "
                                                     "at most 50", "items": obj({
            "network": {"type": "string"}, "address": {"type": "string"},
            "tx_hash": {"type": "string", "description": "the inbound transfer whose trace met it"}})},
        "opaque_count": {"type": "integer"},
        "opaque": {"type": "array", "description": (
            "payouts a record could claim, not flagged, whose origin no on-chain trace can see (at most 50): "
            "`held_before_history`, its payer paid most of it from money it held before the history read "
            "(amount_usd: that part); `omnibus`, it came through an omnibus address (an exchange's hot "
            "wallet: many people's money in one balance) where the user keeps money of their own at least "
            "half its size (amount_usd: the user's money there). Not a fraud flag: the lender's to weigh"),
            "items": obj({
                "network": {"type": "string"}, "tx_hash": {"type": "string"},
                "address": {"type": "string"}, "reason": {"enum": ["held_before_history", "omnibus"]},
                "amount_usd": _USD})}},
        required=["max_hops", "self_funded_share", "transfers_traced", "self_funded", "fetch_cap_hit",
                  "untraced_count", "untraced"]),
    "VipReport": obj({
        "id": ID, "user_id": ID, "generated_at": NULLABLE_TIMESTAMP,
        "status": {"enum": ["verified", "partially_verified", "unverified", "pending", "error"]},
        "verified_monthly_income_usd": _NULLABLE_USD, "income_currency": {"type": "string"},
        "verification_method": {"const": "deterministic_match"},
        "data_source_type": {"enum": ["payroll", "neobank_account", "exchange_account", "payment_platform",
                                      "digital_wallet", None]},
        "data_source_platform": _NULLABLE_TEXT, "payroll_platform": _NULLABLE_TEXT,
        "periods_verified": {"type": "integer"}, "periods_requested": {"type": "integer"},
        "consistency_rate": _NULLABLE_USD, "average_verified_amount": _NULLABLE_USD,
        "income_variance": _NULLABLE_USD,
        "verified_periods": {"type": "array", "items": ref("VerifiedPeriod")},
        "unverified_periods": {"type": "array", "items": ref("UnverifiedPeriod")},
        "fraud_flags": {"type": "array", "items": ref("FraudFlag")},
        "wallet_address": _NULLABLE_TEXT, "network": _NULLABLE_TEXT,
        "error_code": {"type": ["string", "null"],
                       "description": "ERR_INSUFFICIENT_HISTORY for unverified; for error: "
                                      "ERR_VIP_GENERATION_FAILED, ERR_MISSING_WALLET, ERR_MISSING_PLATFORM"},
        "fraud_trace": {"oneOf": [ref("FraudTrace"), {"type": "null"}],
                        "description": "what the funding trace covered (absent or null before a report "
                                       "is made, and in reports made before the trace existed)"},
    }, required=["id", "user_id", "generated_at", "status", "verified_monthly_income_usd", "income_currency",
                 "verification_method", "data_source_type", "data_source_platform", "payroll_platform",
                 "periods_verified", "periods_requested", "consistency_rate", "average_verified_amount",
                 "income_variance", "verified_periods", "unverified_periods", "fraud_flags", "wallet_address",
                 "network", "error_code"]),
    "Pillar": obj({"weight": NUMBER, "score": {"type": "integer", "minimum": 0, "maximum": 1000},
                   "weighted_contribution": {"type": "integer"}, "details": {"type": "object"},
                   "explanation": {"type": "string"}}),
    "RiskScore": obj({
        "id": ID, "user_id": ID, "vip_id": ID, "generated_at": TIMESTAMP,
        "composite_score": {"type": "integer", "minimum": 0, "maximum": 1000},
        "score_range": obj({"min": {"const": 0}, "max": {"const": 1000}}),
        "recommendation": {"enum": ["approve", "approve_with_conditions", "refer", "decline"]},
        "suggested_credit_limit_usd": _USD,
        "pillars": obj({name: ref("Pillar") for name in ("consistency", "volume", "liquidity_buffer",
                                                          "leverage")}),
        "fraud_flags": {"type": "array", "items": ref("FraudFlag")},
        "adverse_action_reasons": {"type": "array", "maxItems": 4, "items": obj(
            {"code": {"type": "string"}, "text": {"type": "string"}, "pillar": {"type": "string"},
             "score": {"type": "integer"}}, required=["code", "text"])},
    }),
})
