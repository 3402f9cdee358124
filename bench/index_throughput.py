"""Indexer throughput against its two raw limits, on the same data in one run.

What it does:
  1. Starts Anvil, deploys the tokens and the TransferSprayer, and mints `--logs` Transfer logs (USDC and
     USDT alternating by block, `--per-block` logs per block, 500 recipients cycled, one spray transaction
     of at most 500 transfers each, automine off and one `anvil_mine` per block).
  2. Indexer: from an empty, freshly migrated database to the head in `all` mode, driving
     `indexer.follower.Follower` directly (`prepare()`, then `step()` until caught up: no poll sleeps).
     The range size is fixed (`initial_block_range = max_block_range = --range`), so the indexer's ranges
     are exactly [0, R-1], [R, 2R-1], ... up to the head.
  3. Raw fetch limit: eth_getLogs over the same ranges, same filter, same `RpcClient` (aiohttp + orjson),
     sequentially like the indexer; decoding with `indexer.decode.parse_token_log` is timed separately.
  4. Raw write limit: the decoded rows, formatted by the indexer's own `indexer.store.copy_text`, COPY'd
     straight into an empty table `LIKE token_transfers INCLUDING ALL` (same primary key and indexes), one
     transaction per range.

It runs `--rounds` rounds (3 by default), each measuring the three in turn into a fresh copy of the
migrated database, and prints every round's ratio and the medians: logs/s for each and
`indexer / min(fetch, copy)`; the goal is at least 75%.

Run (from the repository root):
    .venv/bin/python bench/index_throughput.py                      # 200,000 logs, embedded PostgreSQL
    .venv/bin/python bench/index_throughput.py --logs 50000 --range 25 --json /tmp/bench.json
    .venv/bin/python bench/index_throughput.py --logs 50000 --profile /tmp/ix.prof  # cProfile, indexer only

The database is a new one: `--database-url` (or $DATABASE_URL) names a server on which a throw-away
database `vip_bench_<pid>` is created and dropped; without either, an embedded pgserver in a temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import psutil
import psycopg
import requests
from benchdb import throwaway_database
from eth_abi import encode
from eth_utils import keccak
from sqlalchemy import func, select
from web3 import Web3

from vip.chain.rpc import RpcClient
from vip.config import IndexerConfig, NetworkConfig, RpcConfig, Settings, TokenConfig
from vip.daemon import build_network_tasks, tune_runtime
from vip.devstack.anvil import anvil_binary, start_anvil
from vip.devstack.deploy import deploy_local_contracts
from vip.indexer.decode import parse_token_log
from vip.indexer.fetcher import EVENT_TOPICS
from vip.indexer.store import copy_text
from vip.logging import configure_logging
from vip.store.engine import create_engine
from vip.store.tables import token_approvals, token_transfers

GOAL = 0.75
RECIPIENTS = ["0x" + f"{0xbe00_0000 + i:040x}" for i in range(500)]  # cycled: balances stay warm
MAX_PER_TX = 500
SEL = {name: keccak(text=sig)[:4] for name, sig in [("mint", "mint(address,uint256)"),
                                                    ("approve", "approve(address,uint256)"),
                                                    ("spray", "spray(address,address[],uint256)")]}


class Rpc:
    """Blocking JSON-RPC over one keep-alive HTTP connection (generation only)."""

    def __init__(self, url: str) -> None:
        self.url, self.http = url, requests.Session()

    def __call__(self, method: str, params: list | None = None):
        reply = self.http.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                               "params": params or []}, timeout=120).json()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def send(self, sender: str, to: str, selector: str, types: list[str], args: list, gas: int) -> str:
        data = "0x" + (SEL[selector] + encode(types, args)).hex()
        return self("eth_sendTransaction", [{"from": sender, "to": to, "data": data, "gas": hex(gas)}])


def generate(rpc: Rpc, contracts, logs: int, per_block: int) -> int:
    """Mint, approve, then spray `logs` transfers over ceil(logs / per_block) blocks; returns the head."""
    treasury = rpc("eth_accounts")[0]  # the tokens' minter
    tokens = [contracts.usdc, contracts.usdt]
    for token in tokens:
        rpc.send(treasury, token, "mint", ["address", "uint256"], [treasury, 10**30], 200_000)
        rpc.send(treasury, token, "approve", ["address", "uint256"], [contracts.sprayer, 2**256 - 1], 200_000)
    rpc("evm_setAutomine", [False])
    done = block = 0
    last_tx = None
    while done < logs:
        in_block = min(per_block, logs - done)
        for chunk in range(0, in_block, MAX_PER_TX):
            n = min(MAX_PER_TX, in_block - chunk)
            recipients = [RECIPIENTS[(done + chunk + i) % len(RECIPIENTS)] for i in range(n)]
            last_tx = rpc.send(treasury, contracts.sprayer, "spray", ["address", "address[]", "uint256"],
                               [tokens[block % 2], recipients, 1], 100_000 + 60_000 * n)
        rpc("anvil_mine", ["0x1"])
        done += in_block
        block += 1
    rpc("evm_setAutomine", [True])
    receipt = rpc("eth_getTransactionReceipt", [last_tx])
    if receipt is None or receipt["status"] != "0x1" or len(receipt["logs"]) != in_block:
        raise RuntimeError(f"last spray transaction failed: {receipt and receipt['status']}")
    return int(rpc("eth_blockNumber"), 16)


def cpu_seconds(anvil_pid: int) -> dict[str, float]:
    """CPU time (user + system) so far of this process and of Anvil. (PostgreSQL's backends exit with
    their connections, taking their CPU time with them, so they are not counted.)"""
    def used(proc: psutil.Process) -> float:
        try:
            times = proc.cpu_times()
            return times.user + times.system
        except psutil.Error:
            return 0.0
    return {"python": used(psutil.Process()), "anvil": used(psutil.Process(anvil_pid))}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> str:
    return ", ".join(f"{k} {after[k] - before[k]:.1f}s" for k in before)


async def run_indexer(settings: Settings, network: NetworkConfig, url: str, profile: str | None) -> dict:
    """Empty database -> head with the real Follower; times its fetch and commit phases from outside."""
    engine = create_engine(url, pool_size=4)
    rpc = RpcClient(network.name, network.rpc_url, settings.rpc)  # type: ignore[arg-type]
    follower, _ = build_network_tasks(settings, network, engine, rpc)
    phases = {"fetch": 0.0, "commit": 0.0}

    def timed(obj, name: str, phase: str) -> None:
        inner = getattr(obj, name)

        async def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                phases[phase] += time.perf_counter() - started
        setattr(obj, name, wrapper)  # instance attribute: the indexer's code is untouched

    timed(follower.fetcher, "fetch_range", "fetch")
    timed(follower, "_commit", "commit")
    profiler = cProfile.Profile() if profile else None
    steps = 0
    try:
        # Connected before the clock starts, as the raw COPY's connection is: a daemon connects once.
        async with engine.connect():
            pass
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        await follower.prepare()
        while True:
            steps += 1
            if await follower.step():
                break
        if profiler:
            profiler.disable()
        seconds = time.perf_counter() - started
        async with engine.connect() as conn:
            rows = sum([await conn.scalar(select(func.count()).select_from(t))
                        for t in (token_transfers, token_approvals)])
    finally:
        await rpc.close()
        await engine.dispose()
    if profiler:
        profiler.dump_stats(profile)
    return {"logs": rows, "seconds": seconds, "steps": steps, "fetch_s": phases["fetch"],
            "commit_s": phases["commit"]}


async def raw_fetch(settings: Settings, network: NetworkConfig, ranges: list[tuple[int, int]]):
    """eth_getLogs over the ranges (same client, same filter), then decoding, timed apart."""
    rpc = RpcClient(network.name, network.rpc_url, settings.rpc)  # type: ignore[arg-type]
    base = {"address": [t.address.lower() for t in network.tokens.values()], "topics": [EVENT_TOPICS]}
    fetch_s = decode_s = 0.0
    batches = []
    try:
        for start, end in ranges:
            t0 = time.perf_counter()
            raw = await rpc.get_logs({**base, "fromBlock": hex(start), "toBlock": hex(end)})
            t1 = time.perf_counter()
            batches.append([lg for lg in map(parse_token_log, raw) if lg is not None])
            fetch_s += t1 - t0
            decode_s += time.perf_counter() - t1
        untimed = sorted({lg.block_number for b in batches for lg in b if lg.block_timestamp is None})
        blocks = await rpc.get_blocks(untimed)  # only when the node omits blockTimestamp (not timed)
    finally:
        await rpc.close()
    timestamps = {n: int(b["timestamp"], 16) for n, b in zip(untimed, blocks, strict=True)}
    return fetch_s, decode_s, batches, timestamps


COPY_INTO_BENCH = ("COPY bench_copy (network, tx_hash, log_index, block_number, block_hash, block_timestamp,"
                   " token, token_address, from_address, to_address, amount) FROM STDIN")


def raw_copy(pg_url: str, network: NetworkConfig, batches: list,
             timestamps: dict) -> tuple[float, float, int]:
    """COPY each batch (one transaction each) into an empty token_transfers-shaped table."""
    symbols = network.token_by_address()
    format_s = total_s = 0.0
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE bench_copy (LIKE token_transfers INCLUDING ALL)")
        conn.commit()
        for batch in batches:
            t0 = time.perf_counter()
            # Approvals (the set-up's two) go into the same table: only the write cost is measured.
            text = b"".join(copy_text(network.name, batch, symbols, timestamps).values())
            format_s += time.perf_counter() - t0
            with conn.transaction(), conn.cursor() as cur, cur.copy(COPY_INTO_BENCH) as copy:
                copy.write(text)
            total_s += time.perf_counter() - t0
        rows = conn.execute("SELECT count(*) FROM bench_copy").fetchone()[0]
        conn.execute("DROP TABLE bench_copy")
    return total_s, format_s, rows


def measure_round(settings: Settings, network: NetworkConfig, url: str, pg_url: str,
                  ranges: list[tuple[int, int]], anvil_pid: int, profile: str | None) -> dict:
    """One round: the indexer into the fresh database `url`, then the raw fetch and the raw COPY."""
    cpu = [cpu_seconds(anvil_pid)]
    ix = asyncio.run(run_indexer(settings, network, url, profile))
    cpu.append(cpu_seconds(anvil_pid))
    fetch_s, decode_s, batches, timestamps = asyncio.run(raw_fetch(settings, network, ranges))
    cpu.append(cpu_seconds(anvil_pid))
    fetched = sum(map(len, batches))
    copy_s, format_s, copied = raw_copy(pg_url, network, batches, timestamps)
    cpu.append(cpu_seconds(anvil_pid))
    if not ix["logs"] == fetched == copied or ix["steps"] != len(ranges):
        raise RuntimeError(f"mismatch: indexer {ix['logs']} rows in {ix['steps']} steps, fetched "
                           f"{fetched} in {len(ranges)} ranges, copied {copied}")
    rate = {"indexer": ix["logs"] / ix["seconds"], "fetch": fetched / fetch_s,
            "fetch+decode": fetched / (fetch_s + decode_s), "copy": copied / copy_s}
    seconds = {"indexer": ix["seconds"], "fetch_phase": ix["fetch_s"], "commit_phase": ix["commit_s"],
               "fetch": fetch_s, "fetch+decode": fetch_s + decode_s, "copy": copy_s}
    return {"ix": ix, "fetched": fetched, "copied": copied, "rate": rate, "seconds": seconds,
            "format_s": format_s, "cpu": cpu, "ratio": rate["indexer"] / min(rate["fetch"], rate["copy"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=200_000, help="Transfer logs to generate")
    parser.add_argument("--per-block", type=int, default=200, help="Transfer logs per block")
    parser.add_argument("--range", type=int, default=50, help="blocks per eth_getLogs range / batch")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"),
                        help="PostgreSQL server (default: $DATABASE_URL, else embedded pgserver)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds (indexer, raw fetch, raw COPY each); medians are printed")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--profile", help="cProfile the indexer phase only, pstats to this file")
    args = parser.parse_args()
    configure_logging("console", logging.INFO)  # as `vip index` does: the per-range debug lines are off

    node = None
    shown = ("server_version", "shared_buffers", "synchronous_commit", "fsync")
    with throwaway_database(args.database_url, "vip-bench", shown) as db:
        try:
            pg_url, source, pg = db.pg_url, db.source, db.settings
            node = start_anvil(extra_args=["--gas-limit", "1000000000"])
            w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
            accounts = node.call("eth_accounts")
            contracts = deploy_local_contracts(w3, node.private_keys[0],
                                               Web3.to_checksum_address(accounts[1]),
                                               Web3.to_checksum_address(accounts[0]))
            t0 = time.perf_counter()
            head = generate(Rpc(node.rpc_url), contracts, args.logs, args.per_block)
            gen_s = time.perf_counter() - t0
            print(f"generated {args.logs:,} transfer logs up to block {head:,} in {gen_s:.1f}s", flush=True)

            network = NetworkConfig(
                name="bench", chain_id=node.chain_id, rpc_url=node.rpc_url, local=True, finality_depth=5,
                max_block_range=args.range, initial_block_range=args.range, mode="all", start_block=0,
                tokens={"USDC": TokenConfig(address=contracts.usdc),
                        "USDT": TokenConfig(address=contracts.usdt)})
            settings = Settings(networks={"bench": network},
                                rpc=RpcConfig(timeout_s=120, max_requests_per_s=100_000),
                                indexer=IndexerConfig())
            ranges = [(s, min(s + args.range - 1, head)) for s in range(0, head + 1, args.range)]

            tune_runtime()  # as `vip index` does
            rounds = []
            for n in range(args.rounds):
                # Interleaved: each round measures the indexer and both limits within a few seconds, so a
                # change of the machine's load shows in every measurement of that round, not in one.
                with db.clone(f"r{n}") as round_url:
                    rounds.append(measure_round(settings, network, round_url, pg_url, ranges,
                                                node.process.pid, args.profile if n == 0 else None))
                got = rounds[-1]["rate"]
                print(f"round {n + 1}: indexer {got['indexer']:,.0f}, raw fetch {got['fetch']:,.0f},"
                      f" raw COPY {got['copy']:,.0f} logs/s -> {rounds[-1]['ratio']:.1%}", flush=True)
        finally:
            if node is not None:
                node.stop()

    first = rounds[0]
    fetched, copied, ix = first["fetched"], first["copied"], first["ix"]
    rate = {k: statistics.median(r["rate"][k] for r in rounds) for k in first["rate"]}
    seconds = {k: statistics.median(r["seconds"][k] for r in rounds) for k in first["seconds"]}
    format_s = statistics.median(r["format_s"] for r in rounds)
    limit = min(rate["fetch"], rate["copy"])
    ratio = rate["indexer"] / limit
    anvil_version = subprocess.run([str(anvil_binary()), "--version"], capture_output=True,
                                   text=True).stdout.split("\n")[0].removeprefix("anvil Version: ")
    env = {"cores": os.cpu_count(), "python": platform.python_version(), "anvil": anvil_version,
           "postgres": pg["server_version"], "database": source, **{k: pg[k] for k in list(pg)[1:]}}
    print("\nenvironment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print(f"data: {fetched:,} logs in {head + 1:,} blocks ({args.per_block}/block), "
          f"{len(ranges)} ranges of {args.range} blocks (~{fetched // len(ranges):,} logs per batch)\n")
    print(f"{'measurement':<26}{'logs':>10}{'blocks':>9}{'seconds':>10}{'logs/s':>11}")
    for label, n, s in [("indexer end-to-end", ix["logs"], seconds["indexer"]),
                        ("  fetch_range phase", ix["logs"], seconds["fetch_phase"]),
                        ("  commit phase", ix["logs"], seconds["commit_phase"]),
                        ("raw fetch (eth_getLogs)", fetched, seconds["fetch"]),
                        ("raw fetch+decode", fetched, seconds["fetch+decode"]),
                        ("raw COPY (incl. format)", copied, seconds["copy"])]:
        print(f"{label:<26}{n:>10,}{head + 1:>9,}{s:>10.2f}{n / s:>11,.0f}")
    print(f"\n(the indexer's phases overlap: the next range downloads while one is written; "
          f"COPY text formatting: {format_s:.2f}s)")
    cpu = first["cpu"]
    print(f"CPU used, indexer:   {cpu_delta(cpu[0], cpu[1])}  (round 1)")
    print(f"CPU used, raw fetch: {cpu_delta(cpu[1], cpu[2])}")
    print(f"CPU used, raw COPY:  {cpu_delta(cpu[2], cpu[3])}")
    ratios = ", ".join(f"{r['ratio']:.1%}" for r in rounds)
    print(f"rounds: {ratios}; the figures above are their medians")
    slower = "fetch" if rate["fetch"] <= rate["copy"] else "copy"
    verdict = "PASS" if ratio >= GOAL else "FAIL"
    print(f"indexer / min(fetch, copy) = {rate['indexer']:,.0f} / {limit:,.0f} ({slower}) = {ratio:.1%}"
          f"  -> {verdict} (goal {GOAL:.0%})")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "environment": env, "generation_s": gen_s,
            "params": {"logs": args.logs, "per_block": args.per_block, "range": args.range,
                       "blocks": head + 1, "ranges": len(ranges)},
            "rounds": [{k: r[k] for k in ("ix", "rate", "seconds", "format_s", "ratio")} for r in rounds],
            "median_seconds": seconds, "logs_per_s": rate, "ratio": ratio, "slower_limit": slower,
            "goal": GOAL, "pass": ratio >= GOAL,
        }, indent=2))


if __name__ == "__main__":
    main()
