"""A newly watched wallet's history, backfilled behind the provider stand-in under each profile.

What it does:
  1. Starts Anvil, deploys the tokens, and mines `--blocks` blocks with `--transfers` USDC mints to one
     wallet spread evenly over them (plus as many to other addresses, which the wallet's filter skips).
  2. For each profile (alchemy, infura, quicknode, blockpi, node), for the old fixed ranges (at most
     2,000 blocks, `fixed-2000`), and for Alchemy with a 10,000-block eth_getLogs cap scanned
     (`capped-logs`) and through its Transfers API (`capped-index`: `history_source =
     "alchemy_transfers"`, every transfer confirmed by eth_getLogs and the balances), a fresh network
     name in one throw-away database: the wallet is watched
     from block 0 with the follower already live from the head, and `indexer.backfill.Backfiller.step()`
     runs until nothing is pending, its RPC going through `vip.devstack.provider.ProviderStandIn` with
     that profile's documented limits (no injected faults, no rate limit: the figures are calls, not the
     plan's throughput).
  3. Prints per run: HTTP requests and eth_getLogs calls, refusals, wall time, blocks/s, and checks the
     stored rows are the wallet's transfers.
  4. Extrapolates honestly to a year on each network: calls scale with blocks / (blocks per range), so a
     year costs `year_blocks / measured blocks-per-call` calls; its time at a plan's throughput is printed
     for 25 requests/s (the budget docs/operations.md recommends for one wallet's history) and at the
     latency measured here. The index source's requests do not grow with blocks but with the wallet's
     transfers (pages of 1,000, confirmation ranges, timestamps), so its year is the measured run's
     requests for a wallet with `--transfers` transfers a year. Anvil mines about 250 blocks/s on a
     2-core machine, so a real year (126 million blocks on arbitrum) is not mined; the extrapolation is
     the figure, said to be one.

Run (from the repository root):
    .venv/bin/python bench/history_backfill.py                     # 20,000 blocks, 200 transfers
    .venv/bin/python bench/history_backfill.py --blocks 50000 --transfers 1000 --profiles alchemy quicknode
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import time
from dataclasses import replace

from benchdb import throwaway_database
from sqlalchemy import func, select
from web3 import Web3

from vip.chain.rpc import RpcClient
from vip.config import NetworkConfig, RpcConfig, TokenConfig
from vip.devstack.anvil import start_anvil
from vip.devstack.deploy import deploy_local_contracts
from vip.devstack.provider import PROFILES, ProviderProfile, ProviderStandIn
from vip.indexer import store
from vip.indexer.backfill import Backfiller
from vip.indexer.fetcher import LogFetcher
from vip.indexer.ranges import AdaptiveRange
from vip.logging import configure_logging
from vip.store.engine import create_engine
from vip.store.tables import token_transfers

# Blocks a year at the real block times (12 s, 2 s, 2 s, 0.25 s).
YEAR_BLOCKS = {"ethereum": 365 * 86400 // 12, "polygon": 365 * 86400 // 2, "base": 365 * 86400 // 2,
               "arbitrum": 365 * 86400 * 4}
MINT = "0x40c10f19"  # mint(address,uint256)
# Alchemy's answers with a 10,000-block eth_getLogs cap (a capped plan; Alchemy's free tier caps at 10).
CAPPED_ALCHEMY = replace(PROFILES["alchemy"], name="alchemy-capped", range_cap=10_000,
                         range_error=PROFILES["quicknode"].range_error)


def generate(node, usdc: str, minter: str, wallet: str, blocks: int, transfers: int) -> int:
    """`blocks` blocks, with `transfers` mints to the wallet (and as many to another address) spread out."""
    gap = max(blocks // max(transfers, 1), 1)
    node.call("evm_setAutomine", [False])
    for i in range(transfers):
        for to in (wallet, "0x" + f"{i + 1:040x}"):
            data = MINT + to[2:].rjust(64, "0") + f"{10**6 * (i + 1):064x}"
            node.call("eth_sendTransaction", [{"from": minter, "to": usdc, "data": data,
                                               "gas": hex(100_000)}])
        node.call("anvil_mine", [hex(gap)])
    rest = blocks - gap * transfers
    if rest > 0:
        node.call("anvil_mine", [hex(rest)])
    node.call("evm_setAutomine", [True])
    return int(node.call("eth_blockNumber"), 16)


async def backfill(label: str, profile: ProviderProfile, node, contracts, db_url: str, head: int,
                   wallet: str, initial: int, maximum: int, source: str) -> dict:
    name = label.replace("-", "_")
    with ProviderStandIn(node.rpc_url, profile) as provider:
        network = NetworkConfig(
            name=name, chain_id=node.chain_id, rpc_url=provider.url, local=True, finality_depth=5,
            mode="watched", start_block=0, history_initial_block_range=initial,
            history_max_block_range=maximum, history_source=source,
            tokens={"USDC": TokenConfig(address=contracts.usdc), "USDT": TokenConfig(address=contracts.usdt)})
        engine = create_engine(db_url)
        async with engine.begin() as conn:
            await store.add_watched_address(conn, name, wallet, "wallet", start_block=0)
            await store.mark_live_from(conn, name, [wallet], head + 1)
        rpc = RpcClient(name, provider.url, RpcConfig(timeout_s=120, max_requests_per_s=100_000))
        fetcher = LogFetcher(rpc, network, 500, AdaptiveRange(initial, maximum), 20_000)
        backfiller = Backfiller(network, engine, fetcher)
        started = time.perf_counter()
        while await backfiller.step():
            pass
        seconds = time.perf_counter() - started
        async with engine.connect() as conn:
            rows = await conn.scalar(select(func.count()).select_from(token_transfers)
                                     .where(token_transfers.c.network == name))
        await rpc.close()
        await engine.dispose()
    return {"label": label, "profile": profile.name, "seconds": seconds, "rows": rows, "source": source,
            "http": provider.http_requests, "get_logs": provider.calls["eth_getLogs"],
            "transfers_api": provider.calls["alchemy_getAssetTransfers"],
            "items": sum(provider.calls.values()), "refusals": dict(provider.refusals)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=20_000)
    parser.add_argument("--transfers", type=int, default=200, help="transfers to the wallet")
    parser.add_argument("--profiles", nargs="*",
                        default=["alchemy", "infura", "quicknode", "blockpi", "node"])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = parser.parse_args()
    configure_logging("console", logging.WARNING)

    node = None
    with throwaway_database(args.database_url, "vip-history", ("server_version",)) as db:
        try:
            node = start_anvil()
            w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 600}))
            accounts = node.call("eth_accounts")
            contracts = deploy_local_contracts(w3, node.private_keys[0],
                                               Web3.to_checksum_address(accounts[1]),
                                               Web3.to_checksum_address(accounts[0]))
            wallet = "0x" + "ab" * 20
            t0 = time.perf_counter()
            head = generate(node, contracts.usdc, accounts[0], wallet, args.blocks, args.transfers)
            print(f"mined {head + 1:,} blocks with {args.transfers} transfers to the wallet in "
                  f"{time.perf_counter() - t0:.0f}s", flush=True)
            # The ranges before: from 100, at most 2,000 blocks.
            runs = [("fixed-2000", PROFILES["node"], 100, 2000, "logs")]
            runs += [(p, PROFILES[p], 100_000, 10_000_000, "logs") for p in args.profiles]
            runs += [("capped-logs", CAPPED_ALCHEMY, 100_000, 10_000_000, "logs"),
                     ("capped-index", CAPPED_ALCHEMY, 100_000, 10_000_000, "alchemy_transfers")]
            results = [asyncio.run(backfill(label, profile, node, contracts, db.url, head, wallet, i, m,
                                            source))
                       for label, profile, i, m, source in runs]
        finally:
            if node is not None:
                node.stop()

    blocks = head + 1
    print(f"\n{'run':<14}{'HTTP':>7}{'items':>7}{'getLogs':>9}{'index':>7}{'rows':>6}{'seconds':>9}"
          f"{'blocks/s':>11}{'blocks/call':>13}  refusals")
    for r in results:
        print(f"{r['label']:<14}{r['http']:>7}{r['items']:>7}{r['get_logs']:>9}{r['transfers_api']:>7}"
              f"{r['rows']:>6}"
              f"{r['seconds']:>9.2f}"
              f"{blocks / r['seconds']:>11,.0f}{blocks / r['http']:>13,.0f}  {r['refusals'] or '-'}")
        if r["rows"] != args.transfers:
            print(f"  !! {r['label']}: {r['rows']} rows stored, {args.transfers} expected")
    print("\nExtrapolated to a year of history: the same sizer (indexer.ranges.AdaptiveRange) walked over a "
          "year of blocks, growing after each success up to the profile's block-range cap (no refusals: a "
          "borrower's wallet stays far under the 10,000-result caps), times the HTTP requests per range "
          "measured above, plus the run's refusals once. Time at 25 requests/s, and at the latency "
          "measured here:")
    print(f"{'run':<14}" + "".join(f"{n:>27}" for n in YEAR_BLOCKS))
    transfers = args.transfers
    for (label, profile, initial, maximum, source), r in zip(runs, results, strict=True):
        refused = sum(r["refusals"].values())  # once per run: a stated cap is kept from then on
        ranges = max((r["get_logs"] - refused) // 2, 1)  # two eth_getLogs per range (sender, recipient)
        per_range = (r["http"] - refused) / ranges
        latency = r["seconds"] / r["http"]
        cap = profile.range_cap or maximum
        cells = []
        for year in YEAR_BLOCKS.values():
            calls = http = math.ceil(ranges_for(year, initial, min(maximum, cap)) * per_range) + refused
            if source != "logs":  # per transfer, not per block (see index_year)
                http, calls = index_year(transfers, year)
            cells.append(f"{calls:>9,} {calls / 25:>7.1f}s {http * latency:>7.1f}s")
        print(f"{label:<14}" + "".join(f"{c:>27}" for c in cells))
    print("(columns per network: HTTP requests, seconds at 25 req/s, seconds at the latency measured here;"
          " for capped-index, items: every eth_getLogs, eth_call and header of a batch counted, the latency"
          " per HTTP request)")
    for network, year in YEAR_BLOCKS.items():
        http, items = index_year(transfers, year)
        print(f"capped-index, a year on {network}: {http} HTTP requests, {items} items "
              f"({items / 25:.1f}s at 25 items/s)")


def index_year(transfers: int, year_blocks: int, batch: int = 100, tokens: int = 2) -> tuple[int, int]:
    """HTTP requests and items of the index source for `transfers` spread over a year: two index queries
    per 1,000 transfers, two eth_getLogs per confirmation range (one per transfer once they are more
    than 2,000 blocks apart, else one per 2,000 blocks), two balances per token, a header per block for
    its time (logs that carry `blockTimestamp` spare these), batched `batch` items per request."""
    ranges = min(transfers, math.ceil(year_blocks / 2_000))
    pages = 2 * max(1, math.ceil(transfers / 1_000))
    get_logs, balances, headers = 2 * ranges, 2 * tokens, transfers
    http = pages + math.ceil(get_logs / batch) + 1 + math.ceil(headers / batch)
    return http, pages + get_logs + balances + headers


def ranges_for(blocks: int, initial: int, maximum: int) -> int:
    """How many ranges the adaptive sizer takes to cover `blocks` when every range succeeds sparsely."""
    sizer = AdaptiveRange(initial, maximum)
    covered = count = 0
    while covered < blocks:
        covered += sizer.size
        sizer.succeeded(0, 20_000)
        count += 1
    return count

if __name__ == "__main__":
    main()
