"""Test clocks for integrators: `POST /v1/dev/time-travel` and `vip time-travel` move a local chain's time
and mine blocks, and refuse any network not marked local. The session Anvil is shared, so every check is
relative to the head read just before, and the jumps stay small (hours) so later tests on that chain keep a
clock near the wall's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.support.api import ApiHarness, checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network

HOUR = 3600


def head(chain: ChainDriver) -> tuple[int, int]:
    block = chain.node.call("eth_getBlockByNumber", ["latest", False])
    return int(block["number"], 16), int(block["timestamp"], 16)


def iso_seconds(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


async def travel(api: ApiHarness, body: dict, scopes: list[str] | None = None):
    resp = await api.client.post("/v1/dev/time-travel", json=body, headers=await api.headers(scopes=scopes))
    return resp.status, await resp.json()


async def test_seconds_move_the_chain_and_the_service_clock_forward(api, session_chain):
    number, stamp = head(session_chain)
    status, body = await travel(api, {"network": "local", "seconds": 5 * HOUR, "blocks": 3})
    assert status == 200, body
    assert body["network"] == "local" and body["blocks_mined"] == 3
    assert body["previous"]["block_number"] >= number
    assert body["head"]["block_number"] == body["previous"]["block_number"] + 3
    assert body["head"]["unix_timestamp"] >= stamp + 5 * HOUR
    assert body["advanced_seconds"] >= 5 * HOUR
    assert iso_seconds(body["head"]["timestamp"]) == body["head"]["unix_timestamp"]
    # The node agrees, and the service's clock (the local chain's head) moved with it.
    assert head(session_chain) == (body["head"]["block_number"], body["head"]["unix_timestamp"])
    health = await (await api.client.get("/v1/health")).json()
    assert iso_seconds(health["time"]) >= stamp + 5 * HOUR


async def test_to_timestamp_stamps_the_next_block_exactly(api, session_chain):
    number, stamp = head(session_chain)
    target = stamp + HOUR + 17
    moment = datetime.fromtimestamp(target, UTC).isoformat().replace("+00:00", "Z")
    status, body = await travel(api, {"network": "local", "to_timestamp": moment})
    assert status == 200, body
    assert (body["head"]["block_number"], body["head"]["unix_timestamp"]) == (number + 1, target)

    status, body = await travel(api, {"network": "local", "to_timestamp": target - HOUR})
    assert status == 400 and body["error"]["code"] == "ERR_VALIDATION"
    assert "to_timestamp" in body["error"]["details"]
    assert head(session_chain) == (number + 1, target)  # refused: nothing mined


async def test_only_mining_keeps_time_roughly_still(api, session_chain):
    number, stamp = head(session_chain)
    status, body = await travel(api, {"network": "local", "blocks": 5})
    assert status == 200, body
    assert body["head"]["block_number"] == number + 5
    assert stamp <= body["head"]["unix_timestamp"] < stamp + HOUR


@pytest.fixture
async def api_with_public_network(aiohttp_client, database_url, engine,
                                  session_chain) -> AsyncIterator[ApiHarness]:
    """The API with the local network and a non-local one whose RPC would answer time-travel calls (the
    same Anvil), so only the `local` flag stands between a request and the node."""
    local = local_network(session_chain.node.rpc_url, session_chain.node.chain_id, session_chain.contracts)
    public = local.model_copy(update={"name": "base", "local": False, "chain_id": 8453})
    async with checked_api(aiohttp_client, indexer_settings(local, public), database_url, engine) as harness:
        yield harness


async def test_refused_on_a_network_not_marked_local(api_with_public_network, session_chain):
    before = head(session_chain)
    status, body = await travel(api_with_public_network, {"network": "base", "seconds": HOUR, "blocks": 2})
    assert status == 422, body
    assert body["error"]["code"] == "ERR_NETWORK_NOT_LOCAL"
    assert body["error"]["details"] == {"network": "base"} and body["error"]["request_id"]
    assert head(session_chain) == before


async def test_refused_on_an_unknown_network_and_without_admin_scope(api, session_chain):
    before = head(session_chain)
    status, body = await travel(api, {"network": "ethereum", "seconds": HOUR})
    assert status == 400 and body["error"]["code"] == "ERR_VALIDATION"
    assert "network" in body["error"]["details"]
    status, body = await travel(api, {"network": "local", "seconds": HOUR}, scopes=["read", "write"])
    assert status == 403 and body["error"]["code"] == "ERR_FORBIDDEN"
    status, body = await travel(api, {"network": "local", "seconds": HOUR, "to_timestamp": 2_000_000_000})
    assert status == 400 and body["error"]["code"] == "ERR_VALIDATION"
    assert head(session_chain) == before


def vip_time_travel(*args: str, overlay) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIP_CONFIG": str(overlay)}
    return subprocess.run([sys.executable, "-m", "vip.cli", "time-travel", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.e2e
def test_cli_moves_a_local_network_and_refuses_others(session_chain, tmp_path):
    overlay = tmp_path / "local.toml"
    overlay.write_text(f"""[networks.devchain]
chain_id = {session_chain.node.chain_id}
rpc_url = "{session_chain.node.rpc_url}"
local = true
finality_depth = 3
[networks.devchain.tokens.USDC]
address = "{session_chain.contracts.usdc}"
""")
    number, stamp = head(session_chain)
    done = vip_time_travel("--network", "devchain", "--seconds", str(2 * HOUR), "--blocks", "2",
                           overlay=overlay)
    assert done.returncode == 0, done.stderr
    after_number, after_stamp = head(session_chain)
    assert after_number == number + 2 and after_stamp >= stamp + 2 * HOUR
    assert done.stdout.startswith(f"devchain: block {number} -> {after_number}, ")

    done = vip_time_travel("--network", "base", "--seconds", "60", overlay=overlay)
    assert done.returncode == 2 and "not marked local" in done.stderr
    assert head(session_chain) == (after_number, after_stamp)
