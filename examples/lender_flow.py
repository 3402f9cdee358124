"""A lender's whole journey against a running `vip dev`, using only the public HTTP API (and web3 for the
borrower's and the lender's own on-chain steps):

    scripts/dev --state-file .vip-dev/state.json        # in one terminal
    .venv/bin/python examples/lender_flow.py .vip-dev/state.json

 1. register a webhook endpoint (a receiver this script runs on loopback) and keep its signing secret;
 2. create a user; the borrower signs in with their wallet (EIP-4361);
 3. six months of salary arrive on chain from the employer (chain time moved with the test clock);
 4. push the payroll platform's records of those payouts;
 5. ask for the Verified Income Profile until it is generated; read the risk score;
 6. disburse: the lender registers its funding wallet (it signs the message the service issues), a
    payment intent, the lender's approve() with the returned calldata (the spender is the organisation's
    own), the service confirms the approval, the charge pays the borrower; balances checked on chain;
 7. check the webhooks received: every signature verified, the expected event types all there; the
    endpoint is deleted on the way out, since its receiver goes with this script.

Outside this checkout (whose `.venv` has them all) it needs `pip install web3 eth-account simplejson
signinwithethereum`: the Sign-In with Ethereum library is the PyPI package `signinwithethereum`, imported
as `siwe` (the PyPI package named `siwe` is another, older project that does not import here).

It exits non-zero at the first surprise. Dev-only shortcuts, said where they happen: fresh accounts get
gas money with `anvil_setBalance`, and the test token is minted with the minter key from the state file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.error import HTTPError
from urllib.parse import urlencode, urlsplit
from urllib.request import Request, urlopen

import simplejson
from eth_account import Account
from eth_account.messages import encode_defunct

try:
    from siwe import ISO8601Datetime, SiweMessage
except ImportError:  # `pip install siwe` brings another project, which has no SiweMessage of this shape
    sys.exit("examples/lender_flow.py needs the Sign-In with Ethereum library: "
             "pip install signinwithethereum (PyPI's package `siwe` is another project)")
from web3 import Web3

NETWORK = "local"
SALARY = Decimal("4200")
LOAN = Decimal("2500")
ERC20_ABI = [
    {"name": "transfer", "type": "function", "stateMutability": "nonpayable",
     "inputs": [{"name": "to", "type": "address"}, {"name": "amount", "type": "uint256"}],
     "outputs": [{"name": "", "type": "bool"}]},
    {"name": "approve", "type": "function", "stateMutability": "nonpayable",
     "inputs": [{"name": "spender", "type": "address"}, {"name": "amount", "type": "uint256"}],
     "outputs": [{"name": "", "type": "bool"}]},
    {"name": "balanceOf", "type": "function", "stateMutability": "view",
     "inputs": [{"name": "owner", "type": "address"}], "outputs": [{"name": "", "type": "uint256"}]},
    {"name": "mint", "type": "function", "stateMutability": "nonpayable",
     "inputs": [{"name": "to", "type": "address"}, {"name": "amount", "type": "uint256"}], "outputs": []},
]
EXPECTED_EVENTS = {"connection.wallet.created", "connection.platform.created", "vip.generating",
                   "vip.verified", "risk_score.generated", "payment_intent.created",
                   "payment_intent.approval_confirmed", "charge.succeeded"}


class ApiResponse(NamedTuple):
    status: int
    body: Any


class Api:
    """The service's HTTP API: JSON bodies (amounts as exact decimals), a bearer key, errors returned."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url, self.key = base_url, key

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None,
                **params: Any) -> ApiResponse:
        url = self.base_url + path + ("?" + urlencode(params) if params else "")
        data = simplejson.dumps(body, use_decimal=True).encode() if body is not None else None
        req = Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.key}", "Content-Type": "application/json", **(headers or {})})
        try:
            with urlopen(req, timeout=30) as resp:
                return ApiResponse(resp.status, simplejson.loads(resp.read(), use_decimal=True))
        except HTTPError as exc:  # 4xx/5xx carry the error body: {"error": {"code", "message", ...}}
            return ApiResponse(exc.code, simplejson.loads(exc.read() or b"null", use_decimal=True))

    def get(self, path: str, **params: Any) -> ApiResponse:
        return self.request("GET", path, **params)

    def post(self, path: str, body: Any, **headers: str) -> ApiResponse:
        return self.request("POST", path, body, headers)


class Surprise(RuntimeError):
    """Something the lender would not expect: the script stops and exits 1."""


def expect(condition: bool, what: str, response: ApiResponse | None = None) -> None:
    if not condition:
        detail = f" (HTTP {response.status}: {json.dumps(response.body, default=str)[:600]})" \
            if response else ""
        raise Surprise(what + detail)


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def wait_until(what: str, check, timeout_s: float = 120.0, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise Surprise(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


# --- the lender's webhook receiver -------------------------------------------------------------------------

class WebhookReceiver:
    """Receives deliveries on loopback, verifies `Service-Signature` in constant time, drops duplicates."""

    def __init__(self) -> None:
        self.secret: bytes | None = None
        self.events: dict[str, dict] = {}
        self.bad_signatures = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                # One Service-Signature header per valid secret (two during a secret rotation).
                receiver.receive(body, self.headers.get_all("Service-Signature") or [],
                                 self.headers.get("Service-Event-Id", ""))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def receive(self, body: bytes, signatures: list[str], event_id: str) -> None:
        if self.secret is None:
            return
        expected = "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()
        if not any(hmac.compare_digest(expected, s.strip()) for s in signatures):
            self.bad_signatures += 1
            return
        if event_id in self.events:
            return  # at-least-once delivery: a duplicate is dropped
        self.events[event_id] = json.loads(body)

    def types(self) -> set[str]:
        return {e["type"] for e in self.events.values()}

    def close(self) -> None:
        self.server.shutdown()


# --- the journey ------------------------------------------------------------------------------------------

def month_start(moment: datetime, months_later: int) -> datetime:
    """The first instant (UTC) of the month `months_later` months after `moment`'s month."""
    index = moment.year * 12 + moment.month - 1 + months_later
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def travel(api: Api, **body: Any) -> None:
    """The test clock (local networks only): move chain time forward and/or mine blocks."""
    moved = api.post("/v1/dev/time-travel", {"network": NETWORK, **body})
    expect(moved.status == 200, "chain time did not move", moved)


def run(state_path: Path) -> None:
    state = json.loads(state_path.read_text())
    local = state["networks"][NETWORK]
    api = Api(state["base_url"], state["api_key"])
    w3 = Web3(Web3.HTTPProvider(local["rpc_url"], request_kwargs={"timeout": 30}))
    usdc = w3.eth.contract(address=Web3.to_checksum_address(local["tokens"]["USDC"]), abi=ERC20_ABI)
    borrower, employer, lender = Account.create(), Account.create(), Account.create()
    for account in (borrower, employer, lender):  # dev only: gas money for fresh accounts
        w3.provider.make_request("anvil_setBalance", [account.address, hex(10**19)])

    def send(account, call) -> str:
        tx = call.build_transaction({"from": account.address, "nonce": w3.eth.get_transaction_count(
            account.address), "chainId": local["chain_id"]})
        signed = account.sign_transaction(tx)
        receipt = w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(signed.raw_transaction))
        expect(receipt["status"] == 1, f"transaction {receipt['transactionHash'].hex()} reverted")
        return "0x" + receipt["transactionHash"].hex().removeprefix("0x")

    receiver = WebhookReceiver()
    endpoint_id = None
    try:
        step("1. webhook endpoint")
        created = api.post("/v1/webhook-endpoints", {"url": receiver.url, "description": "lender_flow.py"})
        expect(created.status == 201, "webhook endpoint not created", created)
        receiver.secret = created.body["webhook_endpoint"]["secret"].encode()
        endpoint_id = created.body["webhook_endpoint"]["id"]
        print(f"   {created.body['webhook_endpoint']['id']} -> {receiver.url}")

        step("2. user and wallet sign-in")
        # dev only: the borrower lives on a test clock of its own, so what this run moves (chain time)
        # never changes what another run, a test or the demo sees, and this run's figures do not depend
        # on when it runs.
        chain_now = datetime.fromtimestamp(w3.eth.get_block("latest")["timestamp"], UTC)
        clock = api.post("/v1/test-clocks", {"frozen_time": chain_now.isoformat(), "name": "lender_flow.py"})
        expect(clock.status == 201, "test clock not created", clock)
        clock_id = clock.body["test_clock"]["id"]
        created_user = api.post("/v1/users", {"external_id": f"lender-flow-{int(time.time())}",
                                              "test_clock": clock_id})
        expect(created_user.status == 201, "user not created", created_user)
        user = created_user.body["user"]
        nonce = api.request("GET", "/v1/connect/wallet/nonce", headers={"X-User-Id": user["id"]})
        expect(nonce.status == 200, "no nonce", nonce)
        domain = urlsplit(state["base_url"]).netloc
        message = SiweMessage(
            domain=domain, address=borrower.address, uri=f"http://{domain}/", version="1",
            chain_id=local["chain_id"], nonce=nonce.body["nonce"], statement=nonce.body["statement"],
            issued_at=ISO8601Datetime.from_datetime(datetime.fromisoformat(nonce.body["issued_at"].replace(
                "Z", "+00:00")))).prepare_message()
        signature = "0x" + Account.sign_message(encode_defunct(text=message), borrower.key).signature.hex()
        connected = api.post("/v1/connect/wallet", {"user_id": user["id"], "address": borrower.address,
                                                    "network": NETWORK, "message": message,
                                                    "signature": signature})
        expect(connected.status == 201, "wallet not connected", connected)
        print(f"   user {user['id']}, wallet {borrower.address}")

        step("3. six months of salary on chain")
        # dev only: the test token's minter pays the employer's payroll budget
        minter = Account.from_key(local["minter_private_key"])
        send(minter, usdc.functions.mint(employer.address, int(SALARY * 6 * 10**6)))
        # Payday is the 25th of each of the next six months (chain time moved there with the test clock),
        # then the chain moves into the month after, so all six are complete months of the VIP's lookback.
        now = datetime.fromtimestamp(w3.eth.get_block("latest")["timestamp"], UTC)
        paydays = [month_start(now, months) + timedelta(days=24, hours=12) for months in range(1, 7)]
        for payday in paydays:
            travel(api, to_timestamp=payday.isoformat())
            send(employer, usdc.functions.transfer(borrower.address, int(SALARY * 10**6)))
        # ... and a few blocks, so the last payout is final (the VIP reads final blocks only)
        after_payday = month_start(paydays[-1], 1) + timedelta(days=1)
        travel(api, to_timestamp=after_payday.isoformat(), blocks=5)
        advanced = api.post(f"/v1/test-clocks/{clock_id}/advance", {"frozen_time": after_payday.isoformat()})
        expect(advanced.status == 200, "test clock not advanced", advanced)
        print("   paid on " + ", ".join(f"{d:%Y-%m-%d}" for d in paydays))

        step("4. payroll platform records")
        pushed = api.post("/v1/connect/platform/direct", {
            "user_id": user["id"], "platform": "paystream", "source_type": "payroll",
            "account_id": f"emp-{user['id'][-8:]}",
            "data": {"account_holder": "Example Borrower", "currency": "USDC", "transaction_history": [
                {"date": f"{d:%Y-%m-%d}", "amount": SALARY, "direction": "inbound",
                 "from_reference": employer.address, "description": "Salary"} for d in paydays]}})
        expect(pushed.status == 201, "platform records not accepted", pushed)

        step("5. Verified Income Profile and risk score")
        # The daemon follows the chain a few seconds behind it, and a VIP is made from what is final when
        # it runs: once the payouts show as verified income in the borrower's transactions (labelled as
        # soon as they are final and match a record, no VIP needed), the VIP sees them all.
        def salaries_verified():
            listed = api.get("/v1/transactions", user_id=user["id"], limit=50)
            expect(listed.status == 200, "transactions not listed", listed)
            return sum(1 for t in listed.body["transactions"]
                       if t["classification"] == "verified_income") >= len(paydays)
        wait_until("the salaries to show as verified income", salaries_verified)

        def vip_ready():
            report = api.get("/v1/vip-report", user_id=user["id"], lookback_months=6)
            expect(report.status in (200, 202), "VIP request refused", report)
            return report if report.body["vip_report"]["status"] != "pending" else None
        report = wait_until("the VIP", vip_ready, timeout_s=180)
        vip = report.body["vip_report"]
        expect(vip["status"] == "verified", f"VIP status {vip['status']}", report)
        expect(Decimal(str(vip["verified_monthly_income_usd"])) == SALARY,
               "verified income is not the salary", report)
        print(f"   {vip['status']}: {vip['periods_verified']}/{vip['periods_requested']} months,"
              f" {vip['verified_monthly_income_usd']} USD a month")
        score = api.get("/v1/risk-score", user_id=user["id"], vip_id=vip["id"])
        expect(score.status == 200, "no risk score", score)
        risk = score.body["risk_score"]
        print(f"   score {risk['composite_score']}/1000, {risk['recommendation']},"
              f" suggested limit {risk['suggested_credit_limit_usd']} USD")

        step("6. disbursement")
        # The treasury proves it is ours once: it signs the message naming our organisation and a nonce.
        challenge = api.post("/v1/funding-wallets/nonce", {"address": lender.address, "network": NETWORK})
        expect(challenge.status == 201, "funding wallet nonce refused", challenge)
        proof = lender.sign_message(encode_defunct(text=challenge.body["message"])).signature.hex()
        registered = api.post("/v1/funding-wallets", {"address": lender.address,
                                                      "nonce": challenge.body["nonce"],
                                                      "signature": "0x" + proof.removeprefix("0x")})
        expect(registered.status in (200, 201), "funding wallet not registered", registered)
        print(f"   funding wallet {lender.address} registered ({registered.body['funding_wallet']['kind']})")
        send(minter, usdc.functions.mint(lender.address, int(LOAN * 10**6)))  # dev only: the lender's float
        before = (usdc.functions.balanceOf(borrower.address).call(),
                  usdc.functions.balanceOf(lender.address).call())
        intent = api.post("/v1/payment-intents", {
            "user_id": user["id"], "amount_usd": LOAN, "token": "USDC", "network": NETWORK,
            "recipient_wallet": borrower.address, "funding_wallet": lender.address,
            "metadata": {"loan_id": "loan-0001"}}, **{"Idempotency-Key": f"intent-{user['id']}"})
        expect(intent.status == 201, "payment intent refused", intent)
        pi = intent.body["payment_intent"]
        calldata = pi["approval_calldata"]
        expect(calldata["function"] == "approve" and int(calldata["amount"]) == int(LOAN * 10**6),
               "unexpected approval calldata", intent)
        token = w3.eth.contract(address=Web3.to_checksum_address(calldata["token_contract"]), abi=ERC20_ABI)
        approval = send(lender, token.functions.approve(Web3.to_checksum_address(calldata["spender"]),
                                                        int(calldata["amount"])))
        print(f"   intent {pi['id']}; approve() in {approval}")
        travel(api, blocks=5)  # the approval must be final: the local chain's finality depth is 3 blocks
        wait_until("the approval to be confirmed", lambda: api.get(f"/v1/payment-intents/{pi['id']}")
                   .body["payment_intent"]["status"] == "approval_confirmed")
        charged = api.post("/v1/charges", {"payment_intent_id": pi["id"], "approval_tx_hash": approval},
                           **{"Idempotency-Key": f"charge-{pi['id']}"})
        expect(charged.status in (201, 202), "charge refused", charged)
        charge = charged.body["charge"]
        if charge["status"] == "pending":
            charge = wait_until("the charge", lambda: (c := api.get(f"/v1/charges/{charge['id']}").body[
                "charge"])["status"] != "pending" and c)
        expect(charge["status"] == "succeeded", f"charge {charge['status']}", charged)
        after = (usdc.functions.balanceOf(borrower.address).call(),
                 usdc.functions.balanceOf(lender.address).call())
        units = int(LOAN * 10**6)
        expect(after == (before[0] + units, before[1] - units), f"balances moved {before} -> {after}")
        print(f"   charge {charge['id']} succeeded in {charge['disbursement_tx_hash']}")

        step("7. webhooks")
        wait_until("every expected event", lambda: receiver.types() >= EXPECTED_EVENTS, timeout_s=60)
        expect(receiver.bad_signatures == 0, f"{receiver.bad_signatures} deliveries with a bad signature")
        mine = [e for e in receiver.events.values() if e["type"] in EXPECTED_EVENTS]
        print(f"   {len(receiver.events)} events received and verified: "
              + ", ".join(sorted({e['type'] for e in mine})))
    finally:
        # An endpoint left behind would be sent every later event of the organisation, to no one.
        if endpoint_id is not None:
            api.request("DELETE", f"/v1/webhook-endpoints/{endpoint_id}")
        receiver.close()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        run(Path(sys.argv[1]))
    except Surprise as exc:
        print(f"\nSURPRISE: {exc}", file=sys.stderr)
        return 1
    print("\nthe whole journey worked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
