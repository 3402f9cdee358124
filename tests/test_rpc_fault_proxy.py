"""Tests of the fault-injecting JSON-RPC proxy itself, against a real Anvil node."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.rpc_fault_proxy import FaultPlan, RpcFaultProxy
from vip.devstack.anvil import AnvilNode, rpc_call, start_anvil

MINED = 120  # blocks mined on top of genesis, so the head is well above the getLogs range limit


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    anvil = start_anvil(chain_id=424242)
    anvil.call("anvil_mine", [hex(MINED)])
    yield anvil
    anvil.stop()


@pytest.fixture
def head(node: AnvilNode) -> int:
    return int(node.call("eth_blockNumber"), 16)


def proxy_for(node: AnvilNode, **faults: Any) -> RpcFaultProxy:
    return RpcFaultProxy(node.rpc_url, FaultPlan(**{"seed": 7, **faults}))


def req(method: str, params: list | None = None, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or []}


def logs(from_block: int | str, to_block: int | str, id_: int = 1) -> dict:
    as_tag = lambda b: hex(b) if isinstance(b, int) else b  # noqa: E731
    return req("eth_getLogs", [{"fromBlock": as_tag(from_block), "toBlock": as_tag(to_block)}], id_)


async def post(url: str, payload: Any, client_timeout: float = 10.0) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=client_timeout)) as session,
        session.post(url, data=orjson.dumps(payload), headers={"Content-Type": "application/json"}) as resp,
    ):
        body = await resp.read()
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = body.decode()
        return resp.status, resp.headers, decoded


async def test_no_faults_pass_through_unchanged(node: AnvilNode) -> None:
    batch = [req("eth_getBlockByNumber", ["0x1", False], 1), req("eth_getBlockByNumber", ["0x2", True], 2)]
    with proxy_for(node) as proxy:
        status, _, chain_id = await post(proxy.url, req("eth_chainId"))
        assert (status, chain_id) == (200, {"jsonrpc": "2.0", "id": 1, "result": hex(424242)})
        status, _, via_proxy = await post(proxy.url, batch)
        _, _, direct = await post(node.rpc_url, batch)
        assert status == 200 and via_proxy == direct
        assert [r["result"]["number"] for r in via_proxy] == ["0x1", "0x2"]
        # Also usable from blocking code, although the proxy's loop runs in its own thread.
        assert rpc_call(proxy.url, "eth_chainId") == hex(424242)
        assert proxy.requests == 3 and proxy.injected == [] and not proxy.counts


async def run_sequence(node: AnvilNode, plan: FaultPlan, head: int) -> list[tuple[int, str, str]]:
    """200 requests of a fixed mix, one after another; returns the faults the proxy injected."""
    sequence = [
        req("eth_blockNumber"),
        req("eth_getBlockByNumber", [hex(head - 1), False]),
        logs(0, head),
        logs(head - 5, head),
        [req("eth_chainId", id_=1), logs(10, 100, 2), req("eth_blockNumber", id_=3)],
    ]
    with RpcFaultProxy(node.rpc_url, plan) as proxy:
        for n in range(200):
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                await post(proxy.url, sequence[n % len(sequence)], client_timeout=1.0)
        assert proxy.requests == 200
        assert sum(proxy.counts.values()) == len(proxy.injected)
        return list(proxy.injected)


async def test_same_seed_replays_identical_faults(node: AnvilNode, head: int) -> None:
    plan = FaultPlan(seed=1234, http_error=0.05, rate_limited=0.05, timeout=0.02, dropped=0.05,
                     rpc_error=0.05, too_many_results=0.3, lag_start=0.05, timeout_hold_s=0.05)
    first = await run_sequence(node, plan, head)
    second = await run_sequence(node, plan, head)
    assert first == second
    kinds = {kind for _, _, kind in first}
    assert kinds == {"http_error", "rate_limited", "timeout", "dropped", "rpc_error", "too_many_results",
                     "lag"}
    other = await run_sequence(node, dataclasses.replace(plan, seed=99), head)
    assert other != first


async def test_too_many_results_suggests_a_range(node: AnvilNode, head: int) -> None:
    with proxy_for(node, too_many_results=1.0) as proxy:
        _, _, wide = await post(proxy.url, logs(10, 100))
        assert wide["error"]["code"] == -32005
        assert wide["error"]["message"] == (
            "query returned more than 10000 results. Try with this block range [0xa, 0x3b].")
        _, _, latest = await post(proxy.url, logs("earliest", "latest"))
        assert latest["error"]["message"].endswith("[0x0, 0x31].")
        _, _, narrow = await post(proxy.url, logs(10, 59))
        assert narrow == {"jsonrpc": "2.0", "id": 1, "result": []}
        _, _, mixed = await post(proxy.url, [logs(0, head, 1), logs(head - 2, head, 2)])
        assert mixed[0]["error"]["code"] == -32005 and mixed[1] == {"jsonrpc": "2.0", "id": 2, "result": []}
        assert proxy.counts == {"too_many_results": 3}
        assert [(n, kind) for n, _, kind in proxy.injected] == [
            (1, "too_many_results"), (2, "too_many_results"), (4, "too_many_results")]


async def test_lag_episode(node: AnvilNode, head: int) -> None:
    with proxy_for(node, lag_start=1.0, lag_blocks=3, lag_requests=8) as proxy:
        lagged = head - 3
        _, _, number = await post(proxy.url, req("eth_blockNumber"))
        assert number["result"] == hex(lagged)
        _, _, beyond = await post(proxy.url, logs(lagged - 1, head))
        assert beyond["error"] == {"code": -32000, "message": "block range extends beyond current head block"}
        _, _, within = await post(proxy.url, logs(lagged - 1, lagged))
        assert within["result"] == []
        _, _, batch = await post(proxy.url, [
            req("eth_getBlockByNumber", [hex(head), False], 1),
            req("eth_getBlockByNumber", ["latest", False], 2),
            req("eth_getBlockByNumber", [hex(lagged), False], 3),
            req("eth_chainId", id_=4),
        ])
        assert batch[0] == {"jsonrpc": "2.0", "id": 1, "result": None}
        assert batch[1]["result"]["number"] == hex(lagged) == batch[2]["result"]["number"]
        assert batch[3]["result"] == hex(424242)
        assert proxy.counts == {"lag": 4}
        with proxy.paused():
            assert rpc_call(proxy.url, "eth_blockNumber") == hex(head)
        proxy.set_plan(FaultPlan(seed=0))
        assert rpc_call(proxy.url, "eth_blockNumber") == hex(head)


async def test_rate_limited_carries_retry_after(node: AnvilNode) -> None:
    with proxy_for(node, rate_limited=1.0) as proxy:
        status, headers, body = await post(proxy.url, req("eth_blockNumber"))
        assert status == 429 and headers["Retry-After"] == "1"
        assert body["error"]["code"] == 429
        assert proxy.injected == [(1, "eth_blockNumber", "rate_limited")]


async def test_http_error_and_rpc_error(node: AnvilNode) -> None:
    with proxy_for(node, http_error=1.0) as proxy:
        status, _, body = await post(proxy.url, [req("eth_chainId", id_=1), req("eth_blockNumber", id_=2)])
        assert status in (500, 502, 503) and isinstance(body, str)
        assert proxy.injected == [(1, "eth_chainId,eth_blockNumber", "http_error")]
        proxy.set_plan(FaultPlan(seed=3, rpc_error=1.0))
        status, _, body = await post(proxy.url, [req("eth_chainId", id_=1), req("eth_blockNumber", id_=2)])
        assert status == 200
        assert body == [{"jsonrpc": "2.0", "id": i, "error": {"code": -32603, "message": "internal error"}}
                        for i in (1, 2)]
        assert proxy.counts == {"http_error": 1, "rpc_error": 2}


async def test_dropped_connection_is_a_client_connection_error(node: AnvilNode) -> None:
    with proxy_for(node, dropped=1.0) as proxy:
        with pytest.raises(aiohttp.ClientConnectionError):
            await post(proxy.url, req("eth_blockNumber"))
        assert proxy.counts == {"dropped": 1}
        with proxy.paused():
            assert (await post(proxy.url, req("eth_chainId")))[2]["result"] == hex(424242)


async def test_timeout_holds_past_the_client_timeout(node: AnvilNode) -> None:
    proxy = proxy_for(node, timeout=1.0, timeout_hold_s=2.0)
    proxy.start()
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await post(proxy.url, req("eth_blockNumber"), client_timeout=0.5)
    assert 0.4 < time.monotonic() - started < 1.5
    with pytest.raises(asyncio.TimeoutError):
        await post(proxy.url, req("eth_blockNumber"), client_timeout=0.5)
    stopping = time.monotonic()
    proxy.stop()  # requests still held are released at once
    assert time.monotonic() - stopping < 1.0
    assert proxy.counts == {"timeout": 2}
