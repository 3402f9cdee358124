"""Time-to-VIP: from a borrower's wallet being connected to its VIP being ready, through the whole service
behind the provider stand-in, measured locally and carried over to a year of history on each network.

What it does, per provider profile (`--profiles`, default alchemy and quicknode):
  1. Starts `vip dev --no-demo --provider <profile>` (vip.testing.VipStack): embedded PostgreSQL, Anvil,
     the contracts, the daemon and the API, the daemon and API reaching Anvil through the stand-in with
     that profile's documented limits.
  2. Makes the `--persona` borrower (POST /v1/dev/personas: six months of salary transfers mined on the
     chain, the user created, its wallet connected, the payroll records pushed), then asks for its VIP
     (GET /v1/vip-report) and waits until the daemon has made it: the wallet's history backfilled, the
     counterparties the funding trace needs fetched (each a history of its own), the VIP generated.
  3. Prints the time from the persona's wallet being connected to the VIP being ready, the JSON-RPC
     requests the daemon and the API made for it (their `rpc_requests_total`), and the addresses whose
     history was fetched (the `watched_addresses` rows).
  4. Carries the figure over to a year of history on each network: the local chain holds the persona's
     months in a few hundred blocks, a real year holds 2.6 million (ethereum) to 126 million (arbitrum).
     A history's requests grow with the ranges its blocks take (`ranges_for` of bench/history_backfill.py:
     the adaptive sizer from 100,000 blocks up to the profile's cap, two eth_getLogs per range), so each
     fetched address adds that many requests, paid at `--rate` requests/s (the plan's share for
     histories, 25 by default as docs/operations.md budgets). Pessimistic: every address is taken as a
     history of its own, though the backfiller shares ranges among addresses with the same start.

Run (from the repository root; about a minute per profile):
    .venv/bin/python bench/time_to_vip.py
    .venv/bin/python bench/time_to_vip.py --profiles alchemy blockpi --persona wash_trader
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path

from history_backfill import YEAR_BLOCKS, ranges_for
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, func, select

from vip import metrics
from vip.client import VipClient
from vip.devstack.provider import PROFILES
from vip.store.tables import watched_addresses
from vip.testing import VipStack

HISTORY_INITIAL_RANGE, HISTORY_MAX_RANGE = 100_000, 10_000_000


def rpc_requests(*metrics_urls: str) -> int:
    """JSON-RPC HTTP requests the processes behind these /metrics made so far."""
    total = 0.0
    for url in metrics_urls:
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == f"{metrics.NAMESPACE}_rpc_requests":
                total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return int(total)


def history_addresses(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(conn.scalar(select(func.count()).select_from(watched_addresses)) or 0)
    finally:
        engine.dispose()


def measure(profile: str, persona: str, workdir: Path) -> dict:
    stack = VipStack.start(workdir / profile, extra_args=("--provider", profile))
    try:
        client = VipClient(stack.base_url, stack.api_key, timeout_s=300)
        api_metrics = stack.base_url + "/metrics"
        started = time.perf_counter()
        made = client.create_persona(persona)
        connected = time.perf_counter()
        before = rpc_requests(stack.metrics_url, api_metrics)
        vip = client.wait_for_vip(made["user_id"], timeout_s=600)
        ready = time.perf_counter()
        requests = rpc_requests(stack.metrics_url, api_metrics) - before
        addresses = history_addresses(stack.database_url)
    finally:
        stack.stop()
    return {"profile": profile, "persona_s": connected - started, "vip_s": ready - connected,
            "requests": requests, "addresses": addresses, "status": vip["status"],
            "expected": made["expected"]["status"]}


def year_requests(profile: str) -> dict[str, int]:
    """eth_getLogs requests for one address's year of history on each network under the profile."""
    cap = PROFILES[profile].range_cap or HISTORY_MAX_RANGE
    return {network: 2 * ranges_for(blocks, HISTORY_INITIAL_RANGE, min(HISTORY_MAX_RANGE, cap))
            for network, blocks in YEAR_BLOCKS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", nargs="*", default=["alchemy", "quicknode"], choices=sorted(PROFILES))
    parser.add_argument("--persona", default="steady_salaried")
    parser.add_argument("--rate", type=float, default=25.0, help="requests/s the plan gives histories")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vip-time-to-vip-") as tmp:
        results = [measure(profile, args.persona, Path(tmp)) for profile in args.profiles]

    print(f"\npersona {args.persona}: measured on the local chain (2 cores shared)")
    print(f"{'profile':<12}{'persona made':>14}{'connected->VIP':>16}{'RPC requests':>14}{'histories':>11}"
          f"  VIP status")
    for r in results:
        right = "" if r["status"] == r["expected"] else f"  !! expected {r['expected']}"
        print(f"{r['profile']:<12}{r['persona_s']:>13.1f}s{r['vip_s']:>15.1f}s{r['requests']:>14,}"
              f"{r['addresses']:>11}  {r['status']}{right}")
    print(f"\nCarried over to a year of history (every fetched address a year of blocks; its ranges' "
          f"eth_getLogs at {args.rate:g} requests/s added to the measured time):")
    print(f"{'profile':<12}" + "".join(f"{n:>22}" for n in YEAR_BLOCKS))
    for r in results:
        cells = []
        for requests in year_requests(r["profile"]).values():
            extra = r["addresses"] * requests
            cells.append(f"{extra:>9,} req {r['vip_s'] + extra / args.rate:>7.1f}s")
        print(f"{r['profile']:<12}" + "".join(f"{c:>22}" for c in cells))
    print("(per network: the added requests, and the time-to-VIP they make; the 30 s goal holds where the "
          "time is under 30 s)")
    if any(r["status"] != r["expected"] for r in results):
        raise SystemExit("a VIP did not come out as its persona expects")


if __name__ == "__main__":
    main()
