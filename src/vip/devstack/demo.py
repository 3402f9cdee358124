"""`vip dev`'s demo: two borrowers of the demo organisation, seeded through the public API and the chain
so a developer sees the product work in the first minute.

- **Honest Hana**: paid 3,250 USDC on the 25th of each of the last six months by a payroll address, on
  chain (chain time moved month by month with Anvil's time controls); the payroll platform's records of
  the same payouts pushed through `POST /v1/connect/platform/direct`; her wallet signed in with SIWE.
- **Washing Walt**: paid 2,000 USDC a month by the same payroll, and each month 1,500 USDC arrives from a
  friend and goes straight back two days later: income inflated by a wash round-trip.

Seeding runs once per data directory (`demo.json` remembers the borrowers); later runs print the same
borrowers again. Chain time ends at the wall clock's "now", so the service's clock reads today. Both
borrowers live on the demo's test clock, frozen at that "now": whatever later moves the chain (the
example, a test, `vip time-travel`), every start shows the same VIPs and scores.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from eth_account import Account
from web3 import Web3

from vip.chain.contracts import contract_at, send_transaction
from vip.client import VipClient
from vip.devstack.anvil import DEV_PRIVATE_KEYS, rpc_call
from vip.devstack.deploy import mint

MONTHS = 6
PAYDAY = 25
HONEST_SALARY = Decimal("3250")
WASHER_SALARY = Decimal("2000")
WASH_AMOUNT = Decimal("1500")
UNITS = 10**6  # USDC base units per token
PLATFORM = "paystream"
# Anvil's dev accounts 0 and 1 run the stack (deployer/minter, operator); the plugin's borrowers and
# lenders use 2-9 with `--no-demo`. The demo takes the last four.
EMPLOYER_KEY, FRIEND_KEY, WASHER_KEY, HONEST_KEY = DEV_PRIVATE_KEYS[6:10]


@dataclass(frozen=True)
class DemoBorrower:
    name: str
    user_id: str
    wallet: str
    story: str


def paydays(today: datetime, months: int = MONTHS) -> list[datetime]:
    """The 25th at 09:00 UTC of each of the `months` whole months before today's month, oldest first."""
    out = []
    year, month = today.year, today.month
    for _ in range(months):
        year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        out.append(datetime(year, month, PAYDAY, 9, tzinfo=UTC))
    return out[::-1]


class _Chain:
    """The demo's on-chain steps, each in a block whose timestamp the demo chooses."""

    def __init__(self, rpc_url: str, usdc: str) -> None:
        self.rpc_url = rpc_url
        self.w3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 30}))
        self.usdc = contract_at(self.w3, "StandardStablecoin", usdc)

    def at(self, moment: datetime) -> None:
        """The next block is mined at `moment` (or one second after the latest block, if that is later)."""
        latest = self.w3.eth.get_block("latest")["timestamp"]
        rpc_call(self.rpc_url, "evm_setNextBlockTimestamp", [max(int(moment.timestamp()), latest + 1)])

    def pay(self, sender_key: str, to: str, amount: Decimal) -> None:
        send_transaction(self.w3, self.usdc.functions.transfer(Web3.to_checksum_address(to),
                                                               int(amount * UNITS)), sender_key)

    def mine_at(self, moment: datetime) -> None:
        self.at(moment)
        rpc_call(self.rpc_url, "evm_mine", [])


def seed_demo(client: VipClient, rpc_url: str, usdc: str, minter_key: str, data_dir: Path,
              now: datetime | None = None) -> list[DemoBorrower]:
    """Seed the two demo borrowers once; return them (from `demo.json` on later runs)."""
    saved = data_dir / "demo.json"
    if saved.exists():
        return [DemoBorrower(**b) for b in json.loads(saved.read_text())]
    now = now or datetime.now(UTC)
    chain = _Chain(rpc_url, usdc)
    employer, friend = Account.from_key(EMPLOYER_KEY), Account.from_key(FRIEND_KEY)
    honest, washer = Account.from_key(HONEST_KEY), Account.from_key(WASHER_KEY)
    days = paydays(now)

    chain.at(days[0] - timedelta(days=1))
    mint(chain.w3, usdc, employer.address, int((HONEST_SALARY + WASHER_SALARY) * MONTHS * UNITS), minter_key)
    chain.at(days[0] - timedelta(days=1, hours=-1))
    mint(chain.w3, usdc, friend.address, int(WASH_AMOUNT * UNITS), minter_key)
    for payday in days:
        chain.at(payday)
        chain.pay(EMPLOYER_KEY, honest.address, HONEST_SALARY)
        chain.at(payday + timedelta(minutes=5))
        chain.pay(EMPLOYER_KEY, washer.address, WASHER_SALARY)
        chain.at(payday + timedelta(days=2))
        chain.pay(FRIEND_KEY, washer.address, WASH_AMOUNT)  # in ...
        chain.at(payday + timedelta(days=4))
        chain.pay(WASHER_KEY, friend.address, WASH_AMOUNT)  # ... and straight back out
    chain.mine_at(now)  # the service's clock (chain time on a local network) reads today again

    clock = client.post("/v1/test-clocks", {"frozen_time": now.isoformat(), "name": "demo borrowers"})
    if clock.status != 201:
        raise RuntimeError(f"demo test clock refused: {clock.status} {clock.body}")
    borrowers = []
    for name, account, salary, story in (
        ("Honest Hana", honest, HONEST_SALARY,
         f"{HONEST_SALARY} USDC salary on the {PAYDAY}th for {MONTHS} months"),
        ("Washing Walt", washer, WASHER_SALARY,
         f"{WASHER_SALARY} USDC salary plus a {WASH_AMOUNT} USDC wash round-trip each month"),
    ):
        user = client.create_user(external_id=f"demo-{name.split()[1].lower()}", metadata={"name": name},
                                  test_clock=clock.body["test_clock"]["id"])
        client.connect_wallet(user["id"], account)
        history = [{"date": f"{d:%Y-%m-%d}", "amount": salary, "direction": "inbound",
                    "from_reference": employer.address, "description": "Salary"} for d in days]
        pushed = client.post("/v1/connect/platform/direct", {
            "user_id": user["id"], "platform": PLATFORM, "source_type": "payroll",
            "account_id": f"emp-{user['id'][-6:]}",
            "data": {"account_holder": name, "currency": "USDC", "transaction_history": history}})
        if pushed.status != 201:
            raise RuntimeError(f"demo platform push failed: {pushed.status} {pushed.body}")
        borrowers.append(DemoBorrower(name, user["id"], account.address, story))
    saved.write_text(json.dumps([asdict(b) for b in borrowers], indent=2) + "\n")
    return borrowers


def demo_calls(base_url: str, api_key: str, borrower: DemoBorrower) -> list[str]:
    """The curl lines a lender would run for one borrower."""
    auth = f"-H 'Authorization: Bearer {api_key}'"
    return [f"curl -s {auth} '{base_url}/v1/{path}?user_id={borrower.user_id}'"
            for path in ("transactions", "vip-report", "risk-score")]


def demo_outcome(client: VipClient, borrower: DemoBorrower, timeout_s: float = 180.0,
                 stopped: Callable[[], bool] = lambda: False) -> list[str]:
    """What a lender sees for the borrower: the VIP (waited for while the daemon makes it) and the score."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = client.get_within_limits("/v1/vip-report", deadline, stopped, user_id=borrower.user_id)
        if report.status not in (200, 202):
            return [f"VIP: HTTP {report.status} {report.error_code}"]
        vip = report.body["vip_report"]
        if vip["status"] != "pending":
            break
        if stopped():
            return ["VIP: still pending (stopped before it was made)"]
        if time.monotonic() > deadline:
            return ["VIP: still pending (the indexer is backfilling); run the curl lines above in a minute"]
        time.sleep(1.0)
    flags = sorted({f["code"] for f in vip["fraud_flags"]})
    months = f"{vip['periods_verified']}/{vip['periods_requested']} months"
    lines = [f"VIP {vip['id']}: {vip['status']}, {months}, "
             f"verified monthly income {vip['verified_monthly_income_usd']} USD"
             + (f", fraud flags {', '.join(flags)}" if flags else "")]
    score = client.get_within_limits("/v1/risk-score", deadline, stopped, user_id=borrower.user_id,
                                     vip_id=vip["id"])
    if score.status == 200:
        risk = score.body["risk_score"]
        reasons = "; ".join(r["code"] for r in risk["adverse_action_reasons"])
        lines.append(f"risk score {risk['composite_score']}/1000: {risk['recommendation']}, suggested limit "
                     f"{risk['suggested_credit_limit_usd']} USD"
                     + (f" (reasons: {reasons})" if reasons else ""))
    else:
        lines.append(f"risk score: HTTP {score.status} {score.error_code}")
    return lines
