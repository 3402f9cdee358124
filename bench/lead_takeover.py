"""How fast a standby `vip index` takes a network over when its leader is killed with SIGKILL.

    .venv/bin/python bench/lead_takeover.py                     # 5 kills, the shipped lead_poll_s (1 s)
    .venv/bin/python bench/lead_takeover.py --kills 10 --lead-poll 0.2
    DATABASE_URL=postgresql://... .venv/bin/python bench/lead_takeover.py

Two real `vip index` processes on one Anvil network and one database. Each round kills the leader with
SIGKILL at a random moment of the standby's poll, mines a block with a watched address's transfer at
once, and times from the kill to (1) the standby's take of the lead (`chain_cursors.leader_since`, the
database's clock on this machine) and (2) the cursor reaching that block, stored by the new leader. The
killed daemon is started again (and waited for until it stands by) as the next
standby. Figures only: nothing fails on a slow machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from benchdb import throwaway_database
from web3 import Web3

from vip.devstack.anvil import free_port, start_anvil
from vip.devstack.deploy import deploy_local_contracts


def config_text(rpc_url: str, chain_id: int, contracts, metrics_port: int, lead_poll_s: float) -> str:
    return f"""
[daemon]
metrics_port = {metrics_port}

[indexer]
lead_poll_s = {lead_poll_s}

[networks.bench]
chain_id = {chain_id}
rpc_url = "{rpc_url}"
local = true
finality_depth = 4
poll_interval_s = 0.1
mode = "watched"
start_block = 0

[networks.bench.tokens.USDC]
address = "{contracts.usdc}"
"""


def spawn(tmp: Path, name: str, database_url: str, text: str) -> subprocess.Popen:
    config = tmp / f"{name}.toml"
    config.write_text(text)
    env = {**os.environ, "DATABASE_URL": database_url, "VIP_CONFIG": str(config), "VIP_LOG_FORMAT": "json"}
    with open(tmp / f"{name}.log", "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "vip.cli", "index"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def leader(pg_url: str) -> tuple[int | None, float | None, int]:
    """(leader pid, when it took the lead as unix time, cursor block)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT leader, extract(epoch FROM leader_since), block_number FROM chain_cursors"
                           " WHERE network = 'bench'").fetchone()
    if row is None or row[0] is None:
        return None, None, -1
    return int(row[0].rsplit(":", 1)[1]), float(row[1]), row[2]


def new_leader(pg_url: str, old: int | None):
    found = leader(pg_url)
    return found if found[0] not in (None, old) else None


def standing_by(log: Path, offset: int) -> bool:
    """Whether the daemon writing `log` from `offset` on logged that it stands by."""
    with open(log, "rb") as f:
        f.seek(offset)
        return b"standby for network" in f.read()


def wait_for(what: str, check, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lead-poll", type=float, default=1.0, help="[indexer] lead_poll_s")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--logs", help="copy the daemons' logs to this directory")
    args = parser.parse_args()
    rng = random.Random(20261128)

    with throwaway_database(args.database_url, "vip-lead", ("server_version",)) as db:
        node = start_anvil()
        procs: dict[str, subprocess.Popen] = {}
        try:
            w3 = Web3(Web3.HTTPProvider(node.rpc_url))
            accounts = [a.lower() for a in node.call("eth_accounts")]
            contracts = deploy_local_contracts(w3, node.private_keys[0],
                                               Web3.to_checksum_address(accounts[1]),
                                               Web3.to_checksum_address(accounts[0]))
            watched = accounts[3]
            with psycopg.connect(db.pg_url, autocommit=True) as conn:
                conn.execute("INSERT INTO watched_addresses (network, address, reason, start_block)"
                             " VALUES ('bench', %s, 'wallet', 0)", (watched,))

            def start(name: str) -> None:
                """Start daemon `name` and wait until it stands by (or leads, the first one)."""
                log = db.tmp / f"{name}.log"
                offset = log.stat().st_size if log.exists() else 0
                procs[name] = spawn(db.tmp, name, db.pg_url, config_text(
                    node.rpc_url, node.chain_id, contracts, free_port(), args.lead_poll))
                if len(procs) > 1:
                    wait_for(f"{name} standing by", lambda: standing_by(log, offset))

            start("a")
            wait_for("a first leader", lambda: leader(db.pg_url)[0] == procs["a"].pid)
            start("b")
            took, stored = [], []
            for _ in range(args.kills):
                pid, _, _ = leader(db.pg_url)
                dead = next(n for n, p in procs.items() if p.pid == pid)
                time.sleep(rng.uniform(0.5, 0.5 + args.lead_poll))  # at any moment of the standby's poll
                killed_at = time.time()
                procs[dead].send_signal(signal.SIGKILL)
                mint = "0x40c10f19" + watched[2:].rjust(64, "0") + hex(10**6)[2:].rjust(64, "0")
                node.call("eth_sendTransaction", [{"from": accounts[0], "to": contracts.usdc, "data": mint,
                                                        "gas": hex(200_000)}])
                block = int(node.call("eth_blockNumber"), 16)
                procs[dead].wait()
                _, since, _ = wait_for("a new leader", lambda old=pid: new_leader(db.pg_url, old))
                wait_for("the block stored", lambda b=block: leader(db.pg_url)[2] >= b)
                stored.append(time.time() - killed_at)
                took.append(since - killed_at)
                start(dead)
            print(f"{db.source}, PostgreSQL {db.settings['server_version']}, lead_poll_s {args.lead_poll},"
                  f" {args.kills} kills")
            for label, xs in (("kill -9 -> standby takes the lead", took),
                              ("kill -9 -> a new block stored by it", stored)):
                print(f"  {label}: median {statistics.median(xs):.3f}s, min {min(xs):.3f}s,"
                      f" max {max(xs):.3f}s; each: {', '.join(f'{x:.3f}' for x in xs)}")
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(15)
            if args.logs:
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for log in db.tmp.glob("*.log"):
                    shutil.copy(log, args.logs)
            node.stop()


if __name__ == "__main__":
    main()
