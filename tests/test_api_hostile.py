"""Hostile requests on real HTTP over loopback: deep or large JSON, NUL characters in paths and queries,
oversized request lines and headers, 405s. Each is refused in the spec's error body, never a 500."""

from __future__ import annotations

import asyncio
import json

from jsonschema import Draft202012Validator

from tests.test_api_access import assert_error


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_deeply_nested_bodies_are_400_and_change_nothing(api):
    headers = {**await api.headers(), "Content-Type": "application/json"}
    bodies = [
        ('{"metadata": {"a": ' + nested(5_000) + "}}", "/v1/users"),
        (nested(100_000), "/v1/users"),
        ('{"metadata": ' + '{"a": ' * 5_000 + "1" + "}" * 5_000 + "}", "/v1/users"),
        ('{"user_id": "usr_x", "amount_usd": 10, "network": "local", "recipient_wallet": "0x'
         + "1" * 40 + '", "metadata": {"loan_id": ' + nested(5_000) + "}}", "/v1/payment-intents"),
    ]
    for body, path in bodies:
        resp = await api.client.post(path, data=body.encode(), headers=headers)
        assert resp.status == 400, (path, body[:60], await resp.text())
        payload = await resp.json()
        assert_error(payload, "ERR_VALIDATION")
        assert "body" in payload["error"]["details"]
    # Nesting within the limit is still accepted.
    resp = await api.client.post("/v1/users", data=json.dumps({"metadata": {"a": [[[[1]]]]}}).encode(),
                                 headers=headers)
    assert resp.status == 201
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 1
        assert (await conn.exec_driver_sql("select count(*) from payment_intents")).scalar() == 0


async def test_brackets_inside_strings_do_not_count_as_nesting(api):
    body = json.dumps({"metadata": {"note": "[" * 10_000 + "{" * 10_000}})
    resp = await api.client.post("/v1/users", data=body.encode(),
                                 headers={**await api.headers(), "Content-Type": "application/json"})
    assert resp.status == 201, await resp.text()


async def test_nul_in_a_path_or_query_is_400(api):
    headers = await api.headers()
    user_id = await api.user()
    for url in ["/v1/users/usr_%00x", f"/v1/users/{user_id}%00", "/v1/payment-intents/pi_%00",
                f"/v1/vip-report?user_id={user_id}%00", "/v1/transactions?user_id=a%00b",
                f"/v1/wallets?user_id={user_id}&network=%00", "/v1/users/usr_x?x=%00",
                "/v1/events?type=%00", "/v1/nothing%00here"]:
        resp = await api.client.get(url, headers=headers)
        assert resp.status == 400, (url, await resp.text())
        payload = await resp.json()
        assert_error(payload, "ERR_VALIDATION")
        assert resp.headers["X-Request-Id"] == payload["error"]["request_id"]
    resp = await api.client.delete("/v1/webhook-endpoints/we_%00", headers=headers)
    assert resp.status == 400


async def raw_exchange(api, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes to the server and read one HTTP/1.1 response (status, headers, body)."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 10)
        return status, headers, body
    finally:
        writer.close()


async def test_oversized_request_lines_and_headers_get_the_error_body(api):
    host = f"Host: {api.client.server.host}\r\n"
    cases = [
        f"GET /v1/users/{'a' * 9000} HTTP/1.1\r\n{host}\r\n",
        f"GET /v1/health?q={'a' * 9000} HTTP/1.1\r\n{host}\r\n",
        f"GET /v1/health HTTP/1.1\r\n{host}X-Big: {'b' * 9000}\r\n\r\n",
        f"GET /v1/health HTTP/1.1\r\n{host}{'X' * 9000}: b\r\n\r\n",
    ]
    for raw in cases:
        status, headers, body = await raw_exchange(api, raw.encode())
        assert status == 400, (raw[:40], body[:200])
        assert headers["content-type"].startswith("application/json")
        payload = json.loads(body)
        assert_error(payload, "ERR_VALIDATION")
        assert headers["x-request-id"] == payload["error"]["request_id"]


async def test_405_answers_carry_allow_and_the_error_body(api):
    headers = await api.headers()
    for method, path, allowed in [("PUT", "/v1/users", {"POST"}), ("DELETE", "/v1/users/usr_x", {"GET"}),
                                  ("PATCH", "/v1/transactions", {"GET", "HEAD"}),
                                  ("GET", "/v1/charges", {"POST"})]:
        resp = await api.client.request(method, path, headers=headers)
        assert resp.status == 405, (method, path)
        assert_error(await resp.json(), "ERR_METHOD_NOT_ALLOWED")
        assert {m.strip() for m in resp.headers["Allow"].split(",")} >= allowed, resp.headers.get("Allow")


async def test_bodies_over_the_size_limit_are_refused_in_the_error_body(api):
    body = json.dumps({"metadata": {"blob": "x" * (2 * 1024 * 1024)}}).encode()
    resp = await api.client.post("/v1/users", data=body,
                                 headers={**await api.headers(), "Content-Type": "application/json"})
    assert resp.status == 400
    payload = await resp.json()
    assert_error(payload, "ERR_BODY_TOO_LARGE")
    assert resp.headers["X-Request-Id"] == payload["error"]["request_id"]
    async with api.engine.connect() as conn:
        assert (await conn.exec_driver_sql("select count(*) from users")).scalar() == 0


async def test_the_document_refuses_what_the_validators_refuse(api):
    doc = await (await api.client.get("/v1/openapi.json")).json()
    currency = Draft202012Validator(doc["components"]["schemas"]["DirectData"]["properties"]["currency"])
    assert not currency.is_valid("00") and not currency.is_valid("1USD")
    assert currency.is_valid("USDC") and currency.is_valid("usd")
    for path in ("/v1/transactions", "/v1/events"):
        [cursor] = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == "cursor"]
        assert not Draft202012Validator(cursor["schema"]).is_valid("")
    scopes = Draft202012Validator(doc["components"]["schemas"]["CreateKey"]["properties"]["scopes"])
    assert not scopes.is_valid(["root"]) and scopes.is_valid(["read", "admin"])
    [idempotency] = [p for p in doc["paths"]["/v1/users"]["post"]["parameters"]
                     if p["name"] == "Idempotency-Key"]
    assert not Draft202012Validator(idempotency["schema"]).is_valid("")
    dates = [p for p in doc["paths"]["/v1/transactions"]["get"]["parameters"] if p["name"].endswith("_date")]
    assert all(not Draft202012Validator(p["schema"]).is_valid("") for p in dates) and len(dates) == 2
    # And the API refuses what the document refuses.
    headers = await api.headers()
    for url in ["/v1/transactions?user_id=usr_x&cursor=", "/v1/events?cursor="]:
        resp = await api.client.get(url, headers=headers)
        assert resp.status == 400, url
        assert_error(await resp.json(), "ERR_VALIDATION")


async def test_nul_in_a_header_is_400_in_the_error_body(api):
    secret = await api.key()
    user_id = await api.user()
    host = f"Host: {api.client.server.host}\r\n"
    for header in [f"X-User-Id: {user_id}\x00", f"X-User-Id: \x00{user_id}", "Idempotency-Key: a\x00b",
                   "X-Request-Id: abcdefgh\x00"]:
        raw = (f"GET /v1/connect/wallet/nonce HTTP/1.1\r\n{host}Authorization: Bearer {secret}\r\n"
               f"X-User-Id: {user_id}\r\n{header}\r\n\r\n")
        if header.startswith("X-User-Id"):
            raw = raw.replace(f"X-User-Id: {user_id}\r\n", "", 1)
        status, headers, body = await raw_exchange(api, raw.encode())
        assert status == 400, (header, status, body[:300])  # the HTTP parser refuses NUL in a header
        assert headers["content-type"].startswith("application/json"), header
        payload = json.loads(body)
        assert_error(payload, "ERR_VALIDATION")
        assert headers["x-request-id"] == payload["error"]["request_id"]
