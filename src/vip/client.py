"""A small synchronous client of the service's public HTTP API, as a lender's backend uses it: JSON in and
out, the spec's error body returned (not raised), and Sign-In with Ethereum done as a borrower's wallet
would. Used by `vip dev`'s demo, the pytest plugin (`vip.testing`) and integrators' scripts."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import simplejson as json
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from siwe import ISO8601Datetime, SiweMessage

LOCAL_NETWORK = "local"


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def error_code(self) -> str | None:
        return self.body.get("error", {}).get("code") if isinstance(self.body, dict) else None


class VipClient:
    """A small synchronous client of the public HTTP API (what a lender's backend does)."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> ApiResponse:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        # Decimals go out as JSON numbers with their exact digits, and come back as Decimals.
        data = json.dumps(body, use_decimal=True).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.api_key}", **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw, status, got = resp.read(), resp.status, dict(resp.headers)
        except urllib.error.HTTPError as exc:
            raw, status, got = exc.read(), exc.code, dict(exc.headers)
        return ApiResponse(status, json.loads(raw, use_decimal=True) if raw else None, got)

    def get(self, path: str, **params: Any) -> ApiResponse:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None, **headers: str) -> ApiResponse:
        return self.request("POST", path, body if body is not None else {}, headers=headers)

    def delete(self, path: str) -> ApiResponse:
        return self.request("DELETE", path)

    def create_persona(self, name: str, network: str = LOCAL_NETWORK) -> dict:
        """A preset borrower on a development stack (POST /v1/dev/personas): its user id, wallets, test
        clock and the outcome it must produce."""
        resp = self.post("/v1/dev/personas", {"persona": name, "network": network})
        assert resp.status == 201, resp.body
        return resp.body["persona"]

    def get_within_limits(self, path: str, deadline: float, stopped: Callable[[], bool] = lambda: False,
                          **params: Any) -> ApiResponse:
        """GET `path`; past the endpoint's rate limit, wait the Retry-After the 429 names, as a lender's
        poller should, unless `stopped()` or the wait would end past `deadline` (time.monotonic()): then
        the 429 is the answer."""
        while True:
            resp = self.get(path, **params)
            if resp.status != 429:
                return resp
            until = time.monotonic() + max(1, int(resp.headers.get("Retry-After", "1")))
            if until > deadline:
                return resp
            while time.monotonic() < until:
                if stopped():
                    return resp
                time.sleep(0.2)

    def wait_for_vip(self, user_id: str, timeout_s: float = 180.0, **params: Any) -> dict:
        """The user's VIP once the daemon has made it (GET /v1/vip-report until it is not pending), waiting
        out the endpoint's per-user rate limit (`get_within_limits`)."""
        deadline = time.monotonic() + timeout_s
        while True:
            resp = self.get_within_limits("/v1/vip-report", deadline, user_id=user_id, **params)
            assert resp.status != 429, f"the VIP of {user_id} still pending after {timeout_s} s"
            assert resp.status in (200, 202), resp.body
            if resp.body["vip_report"]["status"] != "pending":
                return resp.body["vip_report"]
            assert time.monotonic() < deadline, f"the VIP of {user_id} is still pending after {timeout_s} s"
            time.sleep(0.5)

    def create_user(self, **body: Any) -> dict:
        resp = self.post("/v1/users", body)
        assert resp.status == 201, resp.body
        return resp.body["user"]

    def connect_wallet(self, user_id: str, account: LocalAccount, network: str = LOCAL_NETWORK,
                       chain_id: int = 31337) -> dict:
        """Sign in with Ethereum as the borrower would in the lender's app: nonce, EIP-4361, signature."""
        nonce = self.request("GET", "/v1/connect/wallet/nonce", headers={"X-User-Id": user_id})
        assert nonce.status == 200, nonce.body
        domain = urllib.parse.urlsplit(self.base_url).netloc
        # Issued At is the service's clock (on a local chain it follows chain time, not the test's clock).
        issued_at = datetime.fromisoformat(nonce.body["issued_at"].replace("Z", "+00:00"))
        message = SiweMessage(
            domain=domain, address=account.address, uri=f"http://{domain}/", version="1",
            chain_id=chain_id, nonce=nonce.body["nonce"],
            statement=nonce.body["statement"],  # the service's, word for word
            issued_at=ISO8601Datetime.from_datetime(issued_at),
        ).prepare_message()
        signature = "0x" + Account.sign_message(encode_defunct(text=message), account.key).signature.hex()
        resp = self.post("/v1/connect/wallet", {"user_id": user_id, "address": account.address,
                                                "network": network, "message": message,
                                                "signature": signature})
        assert resp.status == 201, resp.body
        return resp.body["connection"]
