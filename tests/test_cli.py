"""The operator commands `vip watch` and `vip status` against a real database; `vip serve` and `vip index`
refusing to start with no network."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.webhooks import PRODUCTION_SECRETS
from vip.cli.service import no_networks_error
from vip.config import load_settings
from vip.devstack.anvil import free_ports
from vip.devstack.dev import wait_http
from vip.indexer import store
from vip.indexer.store import Cursor

ADDRESS = "0x8ba1f109551bD432803012645Ac136ddd64DBA72"


def vip(*args: str, database_url: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", *args], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.e2e
async def test_watch_then_status(database_url, engine):
    assert vip("watch", "base", ADDRESS, "--start-block", "123", database_url=database_url).startswith(
        "watching")
    assert vip("watch", "base", ADDRESS, database_url=database_url).startswith("already watched")
    async with engine.connect() as conn:
        [watched] = await store.load_watch_set(conn, "base")
    assert (watched.address, watched.start_block) == (ADDRESS.lower(), 123)

    async with engine.begin() as conn:
        await store.init_cursor(conn, "base", 8453, Cursor(4567, "0xabc"))
    line = vip("status", database_url=database_url).strip()
    assert line.split() == ["base", "chain", "8453", "block", "4567", "watched", "1", "reorgs", "0",
                            "leader", "-"]
    async with engine.begin() as conn:
        await store.take_lead(conn, "base", "indexer-a:4121")
    line = vip("status", database_url=database_url).strip()
    assert line.split()[-2:] == ["leader", "indexer-a:4121"]


# --- serve and index refuse to start with no network ------------------------------------------------

UNREACHABLE_DATABASE = "postgresql://nobody@127.0.0.1:9/none"  # refusing must come before any connection


def env_without_networks(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIP_RPC_") and k != "VIP_CONFIG"}
    return {**env, **extra}


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["serve", "index"])
def test_serve_and_index_refuse_to_start_with_no_network(command):
    done = subprocess.run([sys.executable, "-m", "vip.cli", command], capture_output=True, text=True,
                          env=env_without_networks(DATABASE_URL=UNREACHABLE_DATABASE), timeout=60)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"vip {command}: no network is enabled")
    for named in ("VIP_RPC_<NETWORK>", "VIP_RPC_BASE", "VIP_RPC_ETHEREUM", "$VIP_CONFIG",
                  "--allow-no-networks"):
        assert named in line
    assert done.stdout == ""


def test_a_network_with_an_rpc_url_is_enough():
    settings = load_settings(environ={"VIP_RPC_BASE": "http://127.0.0.1:9"})
    assert no_networks_error(settings, "serve") is None
    assert "VIP_RPC_POLYGON" in no_networks_error(load_settings(environ={}), "index")


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["serve", "index"])
def test_allow_no_networks_starts_anyway(command, database_url, tmp_path):
    api_port, metrics_port = free_ports(2)
    overlay = tmp_path / "ports.toml"
    overlay.write_text(f"[api]\nport = {api_port}\n\n[daemon]\nmetrics_port = {metrics_port}\n")
    # No local network: production, so its secrets must be set.
    env = env_without_networks(DATABASE_URL=database_url, VIP_CONFIG=str(overlay), **PRODUCTION_SECRETS)
    log = tmp_path / f"{command}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vip.cli", command, "--allow-no-networks"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{api_port if command == 'serve' else metrics_port}/healthz", 60, proc)
    finally:
        proc.terminate()
        proc.wait(30)
    assert "no network is enabled" not in log.read_text()
