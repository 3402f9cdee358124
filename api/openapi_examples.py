"""Examples for the OpenAPI document: one for every request body and every response of every operation,
and the `data.object` of every webhook event. They are one lender's story (Acme Lending checks Jane's
salary, scores her and sends her 2,500.50 USDC), so ids and amounts agree from one example to the next.

Amounts are what the API sends and accepts: exact JSON numbers (at most 6 decimals, never a string: the
validators refuse strings); token base units are decimal strings. Addresses are EIP-55 checksummed,
except where the API stores and answers them lower-case (a VIP's wallet and origin addresses).
tests/test_openapi_reference.py validates each example against its own schema.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

# --- the story's identifiers ------------------------------------------------------------------------------
USER = "usr_a83e363308aea5e79604dcb1"
WALLET_CONNECTION = "con_4bdfaf29373f7ac5bb481dbb"
PLATFORM_CONNECTION = "con_f16eb4c271eed77b73ff6786"
WALLET_ID = "wal_2218523ff07fd26fe4b84f7a"
VIP = "vip_be756dc1842d1f2b50704179"
PREVIOUS_VIP = "vip_64160e6409533028f9e6b935"
INTENT = "pi_9c1d2e7f40a35b6c8d0e1f2a"
CHARGE = "ch_ff768881e7d7254ad2b6224e"
ENDPOINT = "whe_5d0c9e1b7a2f48c36e1d0b9a"
EVENT = "evt_0423bdf0e5684b9dbddb0740e18aa0d4"
KEY = "key_7b1e04c9d2a35f86e0c4b1d7"

BORROWER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"   # Jane's wallet
EMPLOYER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"   # the payroll platform's payer
LENDER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"     # Acme's funding wallet
SPENDER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"    # Acme's spender under the disbursement contract
USDC = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
SALARY_TX = "0x67c0db8b1eec81b3fa09083b7bf312e8990a42636f18114de0c81290d86a9c01"
EARLIER_SALARY_TX = "0xaa14e3b52fe64cefc73cc1a8206f964f25542b2cee1a35f68066477394c13163"
SALARY_SECOND_PART_TX = "0x5b0f3c1e9d27a4b86e1f0c3d5a7b9e2f4c6d8a0b1e3f5a7c9d2b4e6f8a0c2e4f"  # a split payout
APPROVAL_TX = "0x4e3a3754410177e6937ef1f84bba68ea139e8d1a2258c5f85db9f1cd715a1bdd"
DISBURSEMENT_TX = "0x9b1e4c6f2a8d0e3b5c7a9f1d2e4b6c8a0f3e5d7c9b1a2f4e6d8c0b3a5f7e9d1c"
NOW = "2027-03-02T12:00:00Z"

# --- resources, as the API answers them -------------------------------------------------------------------
USER_OBJECT = {"id": USER, "external_id": "cust-10482", "metadata": {"segment": "salaried"},
               "created_at": "2027-03-01T09:15:00Z"}
API_KEY = {"id": KEY, "prefix": "vip_sk_Q3k9xLp", "scopes": ["read", "write"],
           "description": "underwriting service", "created_at": "2027-03-01T09:00:00Z",
           "last_used_at": NOW, "revoked_at": None, "status": "active"}
NEW_API_KEY = {**API_KEY, "last_used_at": None,
               "secret": "vip_sk_Q3k9xLpV2mR8tY4wZ6aB1cD5eF7gH9jK0nP3qS5uW7x"}
WALLET_CONNECTION_OBJECT = {
    "id": WALLET_CONNECTION, "user_id": USER, "type": "wallet", "provider": "siwe", "identifier": BORROWER,
    "network": "base", "source_type": None, "status": "active", "created_at": "2027-03-01T09:20:00Z",
    "last_synced_at": "2027-03-01T09:20:00Z"}
PLATFORM_CONNECTION_OBJECT = {
    "id": PLATFORM_CONNECTION, "user_id": USER, "type": "platform", "provider": "paystream",
    "identifier": "Jane Doe", "source_type": "payroll", "status": "active",
    "created_at": "2027-03-01T09:25:00Z", "last_synced_at": "2027-03-01T09:25:00Z"}
WALLET = {"id": WALLET_ID, "connection_id": WALLET_CONNECTION, "address": BORROWER, "network": "base",
          "usdc_balance": 8412.75, "usdt_balance": 0, "first_seen_block": 18250411,
          "created_at": "2027-03-01T09:20:00Z"}
TRANSACTION = {
    "id": "txn_3e8f1a2b4c6d8e0f1a3b5c7d", "wallet_id": WALLET_ID, "user_id": USER, "tx_hash": SALARY_TX,
    "block_number": 26512870, "block_timestamp": "2027-02-25T12:00:00Z", "direction": "inbound",
    "from_address": EMPLOYER, "to_address": BORROWER, "token": "USDC", "amount": 7000, "network": "base",
    "classification": "verified_income", "fraud_flags": [],
    "payroll_match": {"matched": True, "payroll_period": "2027-02", "origin_platform": "paystream",
                      "match_confidence": "exact"}}
PAYMENT_INTENT = {
    "id": INTENT, "status": "pending_approval", "user_id": USER, "amount_usd": 2500.5, "token": "USDC",
    "network": "base", "recipient_wallet": BORROWER, "funding_wallet": LENDER, "contract_address": SPENDER,
    "approval_calldata": {"function": "approve", "spender": SPENDER, "amount": "2500500000",
                          "token_contract": USDC},
    "approval_tx_hash": None, "approval_coverage": None,
    "metadata": {"loan_id": "loan-2291", "product": "salary-advance", "term_months": 6},
    "expires_at": "2027-03-02T12:30:00Z", "created_at": NOW}
CHARGE_OBJECT = {
    "id": CHARGE, "payment_intent_id": INTENT, "status": "succeeded", "amount_usd": 2500.5, "token": "USDC",
    "network": "base", "disbursement_tx_hash": DISBURSEMENT_TX, "recipient_wallet": BORROWER,
    "approval_tx_hash": APPROVAL_TX, "executed_at": "2027-03-02T12:04:12Z", "failure_code": None,
    "failure_message": None, "created_at": "2027-03-02T12:04:10Z"}
FUNDING_WALLET = {"address": LENDER, "network": "base", "kind": "eoa",
                  "registered_at": "2027-02-20T10:00:00Z", "default": True}
SIGN_IN_DOMAIN = {"domain": "app.acme-lending.example",
                  "uri_prefixes": ["https://app.acme-lending.example/connect/"],
                  "created_at": "2027-02-20T09:30:00Z", "updated_at": "2027-02-20T09:30:00Z"}
WEBHOOK_ENDPOINT = {
    "id": ENDPOINT, "url": "https://hooks.acme-lending.example/vip", "description": "underwriting events",
    "event_types": ["vip.verified", "vip.partially_verified", "charge.succeeded", "charge.failed"],
    "status": "enabled", "created_at": "2027-02-20T10:05:00Z", "previous_secret_expires_at": None,
    "deleted_at": None, "disabled_at": None, "disabled_reason": None}
DISABLED_WEBHOOK_ENDPOINT = {
    **WEBHOOK_ENDPOINT, "status": "disabled", "disabled_at": NOW,
    "disabled_reason": "every delivery attempt failed since 2027-02-27T11:58:00Z (more than 3 days)"}
SIGNING_SECRET = "whsec_mT4nQ8vR2xZ6bC0dF3gH7jK1lN5pS9tW"
VERIFIED_PERIOD = {
    "period": "2027-02", "expected_amount": 7000, "received_amount": 7000, "tx_hash": SALARY_TX,
    "transfers": [
        {"tx_hash": SALARY_TX, "log_index": 4, "amount_usd": 6500, "block_timestamp": "2027-02-25T12:00:00Z",
         "origin_address": EMPLOYER.lower()},
        {"tx_hash": SALARY_SECOND_PART_TX, "log_index": 0, "amount_usd": 500,
         "block_timestamp": "2027-02-25T12:06:00Z", "origin_address": EMPLOYER.lower()}],
    "payout_date": "2027-02-25", "block_timestamp": "2027-02-25T12:00:00Z",
    "origin_address": EMPLOYER.lower(), "match_confidence": "exact", "verified": True}
VIP_REPORT = {
    "id": VIP, "user_id": USER, "generated_at": NOW, "status": "verified",
    "verified_monthly_income_usd": 7000, "income_currency": "USD",
    "verification_method": "deterministic_match", "data_source_type": "payroll",
    "data_source_platform": "paystream", "payroll_platform": "paystream", "periods_verified": 2,
    "periods_requested": 2, "consistency_rate": 1, "average_verified_amount": 7000, "income_variance": 0,
    "verified_periods": [
        {**VERIFIED_PERIOD, "period": "2027-01", "tx_hash": EARLIER_SALARY_TX, "payout_date": "2027-01-25",
         "block_timestamp": "2027-01-25T12:00:00Z", "transfers": [
             {"tx_hash": EARLIER_SALARY_TX, "log_index": 2, "amount_usd": 7000,
              "block_timestamp": "2027-01-25T12:00:00Z", "origin_address": EMPLOYER.lower()}]},
        VERIFIED_PERIOD],
    "unverified_periods": [], "fraud_flags": [], "wallet_address": BORROWER.lower(), "network": "base",
    "error_code": None,
    "fraud_trace": {"history_days": 365, "history_from": "2025-12-29T00:00:00Z", "max_hops": 4,
                    "self_funded_share": 0.5, "transfers_traced": 8, "self_funded": 0, "fetch_cap_hit": False,
                    "untraced_count": 0, "untraced": [], "opaque_count": 0, "opaque": []}}
PENDING_VIP_REPORT = {
    **VIP_REPORT, "generated_at": None, "status": "pending", "verified_monthly_income_usd": None,
    "data_source_type": None, "data_source_platform": None, "payroll_platform": None, "periods_verified": 0,
    "consistency_rate": None, "average_verified_amount": None, "income_variance": None,
    "verified_periods": [], "wallet_address": None, "network": None, "fraud_trace": None}


def _pillar(weight: float, score: int, details: dict[str, Any], explanation: str) -> dict[str, Any]:
    return {"weight": weight, "score": score, "weighted_contribution": round(weight * score),
            "details": details, "explanation": explanation}


RISK_SCORE = {
    "id": "rsk_f764b01f3d9fcd048d9a2440", "user_id": USER, "vip_id": VIP, "generated_at": NOW,
    "composite_score": 875, "score_range": {"min": 0, "max": 1000}, "recommendation": "approve",
    "suggested_credit_limit_usd": 21000,
    "pillars": {
        "consistency": _pillar(0.4, 1000, {"periods_verified": 2, "periods_missed": 0, "consistency_rate": 1,
                                           "longest_streak_months": 2},
                               "Income verified in 2 of 2 months, longest unbroken run 2 months."),
        "volume": _pillar(0.25, 700, {"verified_monthly_income_usd": 7000, "annualized_income_usd": 84000,
                                      "income_tier": "mid"},
                          "Verified monthly income 7000 USD (mid tier); full marks from 10000 USD."),
        "liquidity_buffer": _pillar(0.2, 600, {"average_balance_usd": 8412.75, "months_of_income": 1.2018},
                                    "Average balance 8412.75 USD, 1.2 months of income."),
        "leverage": _pillar(0.15, 1000, {"dti_ratio": 0, "estimated_monthly_obligations_usd": 0,
                                         "on_chain_debt_signals": []},
                            "Recurring obligations 0 USD a month, 0.0% of income; 0 lending protocol(s) "
                            "repaid."),
    },
    "fraud_flags": [],
    "adverse_action_reasons": [{"code": "LIQUIDITY_LOW", "text": "Savings cover less than two months of "
                                "income", "pillar": "liquidity_buffer", "score": 600}]}
EVENT_OBJECT = {"id": EVENT, "type": "charge.succeeded", "created_at": "2027-03-02T12:04:12Z",
                "api_version": "v1", "data": {"object": CHARGE_OBJECT}, "delivery_status": "delivered"}
DELIVERY = {
    "id": "whd_8a2c4e6f0b1d3f5a7c9e1b3d", "endpoint_id": ENDPOINT, "url": WEBHOOK_ENDPOINT["url"],
    "status": "delivered", "attempt_count": 2, "next_attempt_at": None,
    "delivered_at": "2027-03-02T12:05:13Z",
    "attempts": [
        {"attempted_at": "2027-03-02T12:04:13Z", "status_code": 503, "error": "HTTP 503",
         "duration_ms": 184},
        {"attempted_at": "2027-03-02T12:05:13Z", "status_code": 200, "error": None, "duration_ms": 96}]}
EVENT_DETAIL = {**EVENT_OBJECT, "deliveries": [DELIVERY]}
REPLAYED_EVENT = {**EVENT_OBJECT, "delivery_status": "pending", "deliveries": [
    {**DELIVERY, "status": "pending", "attempt_count": 0, "next_attempt_at": "2027-03-02T13:00:00Z",
     "delivered_at": None}]}
TEST_CLOCK = {"id": "clk_3e9a1c7b5d2f4e6a8c0b1d3f", "name": "steady salaried persona",
              "frozen_time": NOW, "created_at": NOW}
PERSONA = {"name": "steady_salaried",
           "summary": "4,200 USDC salary on the 25th of every month, matched by the payroll records",
           "expected": {"status": "verified", "periods_verified": 6, "recommendation": "approve",
                        "fraud_flags": []}}
CHAIN_HEAD = {"block_number": 1042, "timestamp": "2027-03-02T12:00:00Z", "unix_timestamp": 1804075200}
SIWE_MESSAGE = (
    "app.acme-lending.example wants you to sign in with your Ethereum account:\n"
    f"{BORROWER}\n\nConnect this wallet to verify my income.\n\n"
    "URI: https://app.acme-lending.example\nVersion: 1\nChain ID: 8453\nNonce: 9f3Kq2Lm7xW1\n"
    "Issued At: 2027-03-01T09:19:30Z")
FUNDING_MESSAGE = (
    f"Register {LENDER} as a funding wallet of this organisation on base.\nNonce: fwn_4d7b2a9c1e3f5a7b")
SIGNATURE = ("0x" + "7c1e2d3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d"
             + "2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d2c3b" + "1b")

# --- request bodies, by the name of their schema ------------------------------------------------------------
REQUESTS: dict[str, Any] = {
    "CreateUser": {"external_id": "cust-10482", "metadata": {"segment": "salaried"}},
    "CreateKey": {"scopes": ["read", "write"], "description": "underwriting service"},
    "ConnectWallet": {"user_id": USER, "address": BORROWER, "network": "base", "message": SIWE_MESSAGE,
                      "signature": SIGNATURE},
    "DirectPlatformConnection": {
        "user_id": USER, "platform": "paystream", "source_type": "payroll", "account_id": "emp-55120",
        "data": {"account_holder": "Jane Doe", "currency": "USD", "transaction_history": [
            {"date": "2027-01-25", "amount": 7000, "direction": "inbound", "from_reference": EMPLOYER,
             "description": "January salary"},
            {"date": "2027-02-25", "amount": 7000, "direction": "inbound", "from_reference": EMPLOYER,
             "description": "February salary"}]}},
    "CreatePaymentIntent": {"user_id": USER, "amount_usd": 2500.5, "token": "USDC", "network": "base",
                            "recipient_wallet": BORROWER, "funding_wallet": LENDER,
                            "metadata": {"loan_id": "loan-2291", "product": "salary-advance",
                                         "term_months": 6}},
    "CreateCharge": {"payment_intent_id": INTENT, "approval_tx_hash": APPROVAL_TX},
    "FundingWalletNonce": {"address": LENDER, "network": "base"},
    "RegisterFundingWallet": {"address": LENDER, "nonce": "fwn_4d7b2a9c1e3f5a7b", "signature": SIGNATURE},
    "RegisterSignInDomain": {"domain": "app.acme-lending.example",
                             "uri_prefixes": ["https://app.acme-lending.example/connect/"]},
    "TimeTravelRequest": {"network": "local", "seconds": 2592000, "blocks": 1},
    "CreatePersona": {"persona": "steady_salaried", "network": "local"},
    "CreateTestClock": {"frozen_time": "2027-03-02T12:00:00Z", "name": "steady salaried persona"},
    "AdvanceTestClock": {"frozen_time": "2027-04-02T12:00:00Z"},
    "CreateWebhookEndpoint": {"url": "https://hooks.acme-lending.example/vip",
                              "event_types": WEBHOOK_ENDPOINT["event_types"],
                              "description": "underwriting events"},
    "ReplayEvent": {"endpoint_id": ENDPOINT},
    "TriggerEvent": {"type": "vip.verified"},
}

# --- successful responses, by operation and status ----------------------------------------------------------
CONNECTION = {"connection": WALLET_CONNECTION_OBJECT}
PLATFORM = {"connection": PLATFORM_CONNECTION_OBJECT}
RESPONSES: dict[tuple[str, str, str], Any] = {
    ("get", "/v1/health", "200"): {"status": "ok", "time": NOW},
    ("post", "/v1/test-clocks", "201"): {"test_clock": TEST_CLOCK},
    ("get", "/v1/dev/personas", "200"): {"personas": [PERSONA]},
    ("post", "/v1/dev/personas", "201"): {"persona": {
        **PERSONA, "user_id": USER, "test_clock": TEST_CLOCK["id"], "frozen_time": NOW,
        "wallets": {"borrower": BORROWER}}},
    ("get", "/v1/test-clocks/{clock_id}", "200"): {"test_clock": TEST_CLOCK},
    ("post", "/v1/test-clocks/{clock_id}/advance", "200"): {"test_clock": {
        **TEST_CLOCK, "frozen_time": "2027-04-02T12:00:00Z"}},
    ("post", "/v1/users", "201"): {"user": USER_OBJECT},
    ("get", "/v1/users/{user_id}", "200"): {"user": USER_OBJECT},
    ("post", "/v1/api-keys", "201"): {"api_key": NEW_API_KEY},
    ("get", "/v1/api-keys", "200"): {"api_keys": [API_KEY]},
    ("delete", "/v1/api-keys/{key_id}", "200"): {"api_key": {**API_KEY, "status": "revoked",
                                                             "revoked_at": NOW}},
    ("get", "/v1/connect/wallet/nonce", "200"): {"nonce": "9f3Kq2Lm7xW1", "issued_at": "2027-03-01T09:19:30Z",
                                                 "expires_at": "2027-03-01T09:29:30Z",
                                                 "statement": "Connect this wallet to verify my income.",
                                                 "sign_in_domains": [{
                                                     "domain": SIGN_IN_DOMAIN["domain"],
                                                     "uri_prefixes": SIGN_IN_DOMAIN["uri_prefixes"]}]},
    ("post", "/v1/sign-in-domains", "201"): {"sign_in_domain": SIGN_IN_DOMAIN},
    ("post", "/v1/sign-in-domains", "200"): {"sign_in_domain": {**SIGN_IN_DOMAIN, "updated_at": NOW}},
    ("get", "/v1/sign-in-domains", "200"): {"sign_in_domains": [SIGN_IN_DOMAIN]},
    ("delete", "/v1/sign-in-domains/{domain}", "200"): {"sign_in_domain": SIGN_IN_DOMAIN},
    ("post", "/v1/connect/wallet", "201"): CONNECTION,
    ("post", "/v1/connect/wallet", "200"): CONNECTION,
    ("get", "/v1/connect/platform/authorize", "200"): {
        "redirect_url": "https://auth.paystream.example/oauth/authorize?response_type=code&client_id=acme"
                        "&state=st_6b1f0e3a9c2d4e5f&redirect_uri=https%3A%2F%2Fapi.vip.example%2Fv1%2Fconnect"
                        "%2Fplatform%2Fcallback",
        "expires_at": "2027-03-01T09:33:00Z"},
    ("get", "/v1/connect/platform/callback", "201"): PLATFORM,
    ("get", "/v1/connect/platform/callback", "200"): PLATFORM,
    ("post", "/v1/connect/platform/direct", "201"): PLATFORM,
    ("post", "/v1/connect/platform/direct", "200"): PLATFORM,
    ("get", "/v1/connections", "200"): {"connections": [
        {k: v for k, v in c.items() if k not in ("user_id", "last_synced_at")}
        for c in (PLATFORM_CONNECTION_OBJECT, WALLET_CONNECTION_OBJECT)]},
    ("delete", "/v1/connections/{connection_id}", "200"): {"connection": {**WALLET_CONNECTION_OBJECT,
                                                                          "status": "revoked"}},
    ("get", "/v1/wallets", "200"): {"wallets": [WALLET]},
    ("get", "/v1/transactions", "200"): {"transactions": [TRANSACTION], "pagination": {
        "cursor": "eyJiIjoyNjUxMjg3MCwibCI6M30", "has_more": True}},
    ("post", "/v1/payment-intents", "201"): {"payment_intent": PAYMENT_INTENT},
    ("get", "/v1/payment-intents/{intent_id}", "200"): {"payment_intent": {
        **PAYMENT_INTENT, "status": "approval_confirmed", "approval_tx_hash": APPROVAL_TX,
        "approval_coverage": "approval"}},
    ("post", "/v1/charges", "201"): {"charge": CHARGE_OBJECT},
    ("post", "/v1/charges", "202"): {"charge": {**CHARGE_OBJECT, "status": "pending", "executed_at": None}},
    ("get", "/v1/charges/{charge_id}", "200"): {"charge": CHARGE_OBJECT},
    ("post", "/v1/funding-wallets/nonce", "201"): {
        "nonce": "fwn_4d7b2a9c1e3f5a7b", "message": FUNDING_MESSAGE, "expires_at": "2027-02-20T10:10:00Z"},
    ("post", "/v1/funding-wallets", "201"): {"funding_wallet": FUNDING_WALLET},
    ("post", "/v1/funding-wallets", "200"): {"funding_wallet": FUNDING_WALLET},
    ("get", "/v1/funding-wallets", "200"): {"funding_wallets": [FUNDING_WALLET]},
    ("delete", "/v1/funding-wallets/{address}", "200"): {"funding_wallet": {**FUNDING_WALLET,
                                                                            "default": False}},
    ("put", "/v1/funding-wallets/{address}/default", "200"): {"funding_wallet": FUNDING_WALLET},
    ("post", "/v1/dev/time-travel", "200"): {
        "network": "local", "previous": CHAIN_HEAD, "advanced_seconds": 2592000, "blocks_mined": 1,
        "head": {"block_number": 1043, "timestamp": "2027-04-01T12:00:00Z", "unix_timestamp": 1806667200}},
    ("get", "/v1/vip-report", "200"): {"vip_report": VIP_REPORT},
    ("get", "/v1/vip-report", "202"): {"vip_report": PENDING_VIP_REPORT},
    ("get", "/v1/risk-score", "200"): {"risk_score": RISK_SCORE},
    ("post", "/v1/webhook-endpoints", "201"): {"webhook_endpoint": {**WEBHOOK_ENDPOINT,
                                                                    "secret": SIGNING_SECRET}},
    ("get", "/v1/webhook-endpoints", "200"): {"webhook_endpoints": [WEBHOOK_ENDPOINT]},
    ("delete", "/v1/webhook-endpoints/{endpoint_id}", "200"): {"webhook_endpoint": {
        **WEBHOOK_ENDPOINT, "status": "deleted", "deleted_at": NOW}},
    ("post", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret", "200"): {"webhook_endpoint": {
        **WEBHOOK_ENDPOINT, "previous_secret_expires_at": "2027-03-03T12:00:00Z",
        "secret": "whsec_Xr5tY8uI1oP4aS7dF0gH3jK6lZ9xC2vB"}},
    ("get", "/v1/events", "200"): {"events": [EVENT_OBJECT], "pagination": {"cursor": None,
                                                                          "has_more": False}},
    ("get", "/v1/events/{event_id}", "200"): {"event": EVENT_DETAIL},
    ("post", "/v1/events/{event_id}/replay", "202"): {"event": REPLAYED_EVENT},
    ("post", "/v1/webhook-endpoints/{endpoint_id}/enable", "200"): {"webhook_endpoint": WEBHOOK_ENDPOINT},
    ("post", "/v1/events/trigger", "201"): {"event": {
        **EVENT_OBJECT, "id": "evt_5b8e1f0c2d4a4e6b9c7d3f1a0e2b4c6d", "type": "vip.verified",
        "data": {"object": VIP_REPORT, "test": True}, "delivery_status": "pending"}},
}


# --- errors: one per status, in the Error schema -----------------------------------------------------------
def _error(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {},
                      "request_id": "req_5f2b8c1d9e3a4f60"}}


ERRORS: dict[str, Any] = {
    "400": _error("ERR_VALIDATION", "invalid body: amount_usd", {"amount_usd": "at most 6 decimals"}),
    "401": _error("ERR_UNAUTHORIZED", "missing API key: send Authorization: Bearer <key>"),
    "403": _error("ERR_FORBIDDEN", "this API key lacks the 'admin' scope", {"required_scope": "admin"}),
    "404": _error("ERR_NOT_FOUND", f"no user {USER}", {"user_id": USER}),
    "409": _error("ERR_IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used with another request",
                  {"Idempotency-Key": "loan-2291-disbursement"}),
    "410": _error("ERR_PAYMENT_INTENT_EXPIRED", "the payment intent expired before its approval was "
                  "confirmed", {"payment_intent_id": INTENT}),
    "422": _error("ERR_UNPROCESSABLE", "a prerequisite is missing"),
    "429": _error("ERR_RATE_LIMITED", "rate limit of 600 requests per minute exceeded", {"limit": 600}),
    "500": _error("ERR_INTERNAL", "unexpected error; quote the request id to support"),
    "502": _error("ERR_CHAIN_UNAVAILABLE", "the network's RPC did not answer", {"network": "base"}),
    "503": _error("ERR_NOT_READY", "the database is not reachable right now; retry shortly",
                  {"database": "unreachable"}),
}
# What a given operation answers with that status, where it is more telling than the status's own.
_WALLET_NOT_CONNECTED = _error("ERR_RECIPIENT_NOT_CONNECTED", "recipient_wallet is not an active connected "
                               "wallet of this user on base", {"recipient_wallet": BORROWER})
OPERATION_ERRORS: dict[tuple[str, str, str], Any] = {
    ("post", "/v1/charges", "503"): _error(
        "ERR_DISBURSEMENT_UNAVAILABLE", "disbursement is not available on base: no daemon with the operator "
        "key is running", {"network": "base"}),
    ("delete", "/v1/api-keys/{key_id}", "404"): _error("ERR_NOT_FOUND", f"no API key {KEY}", {"key_id": KEY}),
    ("post", "/v1/connect/wallet", "422"): _error(
        "ERR_DOMAIN_MISMATCH", "the message's domain is not a sign-in domain of this organisation",
        {"domain": "app.other-lender.example", "accepted_domains": ["app.acme-lending.example"]}),
    ("delete", "/v1/sign-in-domains/{domain}", "404"): _error(
        "ERR_NOT_FOUND", "no such sign-in domain is registered to this organisation",
        {"domain": "app.other-lender.example"}),
    ("post", "/v1/connect/platform/direct", "409"): _error(
        "ERR_CONNECTION_CHANGED", "the connection changed while it was being synced; retry",
        {"account_id": "emp-55120"}),
    ("get", "/v1/connect/platform/callback", "502"): _error(
        "ERR_PLATFORM_SYNC_FAILED", "paystream did not answer the token exchange", {"platform": "paystream"}),
    ("delete", "/v1/connections/{connection_id}", "404"): _error(
        "ERR_NOT_FOUND", f"no connection {WALLET_CONNECTION}", {"connection_id": WALLET_CONNECTION}),
    ("post", "/v1/payment-intents", "422"): _WALLET_NOT_CONNECTED,
    ("get", "/v1/payment-intents/{intent_id}", "404"): _error(
        "ERR_NOT_FOUND", f"no payment intent {INTENT}", {"payment_intent_id": INTENT}),
    ("post", "/v1/charges", "404"): _error("ERR_NOT_FOUND", f"no payment intent {INTENT}",
                                           {"payment_intent_id": INTENT}),
    ("post", "/v1/charges", "409"): _error(
        "ERR_ALREADY_CHARGED", "this payment intent has already been charged",
        {"payment_intent_id": INTENT, "charge_id": CHARGE}),
    ("post", "/v1/charges", "422"): _error(
        "ERR_APPROVAL_NOT_CONFIRMED", "approval_tx_hash is not a confirmed approve() of the intent's amount",
        {"approval_tx_hash": APPROVAL_TX}),
    ("get", "/v1/charges/{charge_id}", "404"): _error("ERR_NOT_FOUND", f"no charge {CHARGE}",
                                                      {"charge_id": CHARGE}),
    **{(verb, path, "404"): _error("ERR_NOT_FOUND", f"no funding wallet {LENDER} in this organisation",
                                   {"address": LENDER})
       for verb, path in (("delete", "/v1/funding-wallets/{address}"),
                          ("put", "/v1/funding-wallets/{address}/default"))},
    ("delete", "/v1/funding-wallets/{address}", "409"): _error(
        "ERR_FUNDING_WALLET_IN_USE", "open payment intents name this funding wallet",
        {"address": LENDER, "payment_intent_ids": [INTENT]}),
    ("post", "/v1/funding-wallets", "409"): _error(
        "ERR_FUNDING_WALLET_TAKEN", "this wallet is registered to another organisation", {"address": LENDER}),
    ("post", "/v1/funding-wallets", "422"): _error(
        "ERR_INVALID_NONCE", "the nonce is unknown, used, expired, or issued for another wallet",
        {"nonce": "fwn_4d7b2a9c1e3f5a7b"}),
    ("get", "/v1/health", "503"): _error(
        "ERR_NOT_READY", "this API process is not ready: rpc:base: no answer within 3 s",
        {"rpc:base": "no answer within 3 s"}),
    ("post", "/v1/users", "404"): _error(
        "ERR_NOT_FOUND", f"no test clock {TEST_CLOCK['id']}", {"test_clock": TEST_CLOCK["id"]}),
    ("post", "/v1/users", "422"): _error(
        "ERR_TEST_CLOCKS_UNAVAILABLE", "test clocks exist only on development stacks (a network marked "
        "local = true)"),
    **{(verb, path, "404"): _error("ERR_NOT_FOUND", f"no test clock {TEST_CLOCK['id']}",
                                   {"test_clock": TEST_CLOCK["id"]})
       for verb, path in (("get", "/v1/test-clocks/{clock_id}"),
                          ("post", "/v1/test-clocks/{clock_id}/advance"))},
    **{(verb, path, "422"): _error(
        "ERR_TEST_CLOCKS_UNAVAILABLE", "test clocks exist only on development stacks (a network marked "
        "local = true)")
       for verb, path in (("post", "/v1/test-clocks"), ("get", "/v1/test-clocks/{clock_id}"),
                          ("post", "/v1/test-clocks/{clock_id}/advance"))},
    **{(verb, "/v1/dev/personas", "422"): _error(
        "ERR_TEST_CLOCKS_UNAVAILABLE", "test clocks exist only on development stacks (a network marked "
        "local = true)") for verb in ("get", "post")},
    ("post", "/v1/dev/personas", "502"): _error(
        "ERR_CHAIN_UNAVAILABLE", "the network's RPC refused or did not answer: connection refused",
        {"network": "local"}),
    ("post", "/v1/dev/time-travel", "422"): _error(
        "ERR_NETWORK_NOT_LOCAL", "base is not a local network", {"network": "base"}),
    ("get", "/v1/vip-report", "422"): _error(
        "ERR_MISSING_WALLET", "the user has no active wallet connection; connect one first",
        {"user_id": USER, "missing": "wallet"}),
    ("get", "/v1/vip-report", "502"): _error(
        "ERR_PLATFORM_SYNC_FAILED", "paystream did not answer the history pull", {"platform": "paystream"}),
    ("get", "/v1/risk-score", "404"): _error(
        "ERR_NO_VIP", "the user has no VIP; call GET /v1/vip-report first", {"user_id": USER}),
    ("get", "/v1/risk-score", "422"): _error(
        "ERR_VIP_PENDING", "the VIP is still being generated; retry in 30 seconds",
        {"vip_id": VIP, "vip_status": "pending"}),
    **{(verb, path, "404"): _error("ERR_NOT_FOUND", f"no webhook endpoint {ENDPOINT}",
                                   {"endpoint_id": ENDPOINT})
       for verb, path in (("delete", "/v1/webhook-endpoints/{endpoint_id}"),
                          ("post", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret"))},
    **{(verb, path, "404"): _error("ERR_NOT_FOUND", f"no event {EVENT}", {"event_id": EVENT})
       for verb, path in (("get", "/v1/events/{event_id}"), ("post", "/v1/events/{event_id}/replay"))},
    ("post", "/v1/events/{event_id}/replay", "422"): _error(
        "ERR_NO_WEBHOOK_ENDPOINT", "no webhook endpoint of the organisation receives this event type",
        {"type": "charge.succeeded"}),
}


def error_example(verb: str, path: str, status: str) -> Any:
    return OPERATION_ERRORS.get((verb, path, status), ERRORS[status])


# --- webhook events: the data.object of each type --------------------------------------------------------
_PARTIAL_VIP = {
    **VIP_REPORT, "status": "partially_verified", "periods_verified": 1, "consistency_rate": 0.5,
    "verified_periods": [VERIFIED_PERIOD],
    "unverified_periods": [{
        "period": "2027-01", "expected_amount": 7000, "received_amount": 5200, "verified": False,
        "reason_codes": ["ERR_INCOME_MISMATCH"],
        "reasons": [{"code": "ERR_INCOME_MISMATCH", "message": "received 5200 against 7000 expected",
                     "details": {"expected_amount": 7000, "received_amount": 5200, "tolerance_pct": 0.05,
                                 "actual_variance_pct": 0.257143}}]}]}
_UNVERIFIED_VIP = {
    **PENDING_VIP_REPORT, "generated_at": NOW, "status": "unverified",
    "error_code": "ERR_INSUFFICIENT_HISTORY",
    "unverified_periods": [{"period": p, "expected_amount": 7000, "received_amount": 0, "verified": False,
                            "reason_codes": ["ERR_INSUFFICIENT_HISTORY"], "reasons": []}
                           for p in ("2027-01", "2027-02")]}
_FAILED_VIP = {**PENDING_VIP_REPORT, "generated_at": NOW, "status": "error",
               "error_code": "ERR_MISSING_WALLET"}
EVENTS: dict[str, Any] = {
    "connection.wallet.created": WALLET_CONNECTION_OBJECT,
    "connection.platform.created": PLATFORM_CONNECTION_OBJECT,
    "connection.revoked": {**WALLET_CONNECTION_OBJECT, "status": "revoked"},
    "vip.generating": PENDING_VIP_REPORT,
    "vip.verified": VIP_REPORT,
    "vip.partially_verified": _PARTIAL_VIP,
    "vip.unverified": _UNVERIFIED_VIP,
    "vip.failed": _FAILED_VIP,
    "income.change_detected": {
        "user_id": USER, "vip_id": VIP, "previous_vip_id": PREVIOUS_VIP,
        "previous_verified_monthly_income_usd": 6000, "verified_monthly_income_usd": 7000,
        "change_pct": 0.166667, "detected_at": NOW},
    "fraud.flagged": {
        "user_id": USER, "wallet_id": WALLET_ID,
        "tx_hash": "0x0abc2340065c2bcfd94826429b3a5c3ce3803f767da5556ac5ade930064743f5",
        "fraud_type": "wash_trade", "amount_usd": 2000, "flagged_at": NOW,
        "details": "value returned to the counterparty it came from within the wash-trade window"},
    "risk_score.generated": RISK_SCORE,
    "payment_intent.created": PAYMENT_INTENT,
    "payment_intent.approval_confirmed": {**PAYMENT_INTENT, "status": "approval_confirmed",
                                          "approval_tx_hash": APPROVAL_TX, "approval_coverage": "approval"},
    "payment_intent.expired": {**PAYMENT_INTENT, "status": "expired"},
    "charge.succeeded": CHARGE_OBJECT,
    "charge.failed": {**CHARGE_OBJECT, "status": "failed", "disbursement_tx_hash": None, "executed_at": None,
                      "failure_code": "ERR_RECIPIENT_BLACKLISTED",
                      "failure_message": "USDC refused the transfer: the recipient wallet " + BORROWER
                                         + " is blacklisted by the token's issuer, so it cannot receive this "
                                         "loan; nothing was sent (the token's reason: 'Blacklistable: "
                                         "account is blacklisted')"},
    "webhook_endpoint.disabled": DISABLED_WEBHOOK_ENDPOINT,
}


def event_example(event_type: str) -> dict[str, Any]:
    """A whole delivery body (the envelope) of `event_type`; its id is stable (the document is
    snapshotted)."""
    return {"id": "evt_" + hashlib.sha256(event_type.encode()).hexdigest()[:32], "type": event_type,
            "created_at": NOW, "api_version": "v1", "data": {"object": copy.deepcopy(EVENTS[event_type])}}
