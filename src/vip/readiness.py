"""Liveness and readiness of a process (API or daemon).

Liveness (`/healthz`) says only that the process answers: a restart is the cure for a hung process, not for
a database or an RPC that is down. Readiness (`/readyz`, also `/v1/health`) says whether this process can
serve lenders now: the database answers and every enabled network's RPC answers `eth_blockNumber`; a load
balancer takes a process that is not ready out of rotation until it is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import aiohttp
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.chain.rpc import RpcClient, RpcError
from vip.config import NetworkConfig

PROBE_TIMEOUT_S = 3.0


async def database_problem(engine: AsyncEngine) -> str | None:
    """None when the database answers a query within the probe's time, else why not (no URL, no secret)."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    except Exception as exc:  # whatever the driver raises, the probe reports it, never crashes
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'unreachable'}"
    return None


async def rpc_problem(http: aiohttp.ClientSession, network: NetworkConfig) -> str | None:
    """None when the network's RPC answers eth_blockNumber, else why not. The URL is never repeated: hosted
    providers put their API key in it."""
    payload = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}
    try:
        async with http.post(network.rpc_url or "", json=payload,
                             timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            answer = await resp.json(content_type=None)
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    except (aiohttp.ClientError, ValueError) as exc:
        return type(exc).__name__
    if not isinstance(answer, dict) or "result" not in answer:
        return "no result in the JSON-RPC answer"
    return None


async def client_problem(rpc: RpcClient) -> str | None:
    """`rpc_problem` through the daemon's own client of the network, so the probe draws from the network's
    RPC budget like every other caller (decision 233)."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await rpc.call("eth_blockNumber", max_attempts=1)
    except TimeoutError:
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    except RpcError as exc:
        return exc.kind
    return None


async def readiness(engine: AsyncEngine, http: aiohttp.ClientSession, networks: list[NetworkConfig],
                    rpcs: Mapping[str, RpcClient] | None = None) -> dict[str, str]:
    """Each dependency's problem, by name (`database`, `rpc:<network>`); empty when the process is ready.
    A network with a client in `rpcs` (the daemon's) is asked through it, others over `http`."""
    names = ["database", *(f"rpc:{n.name}" for n in networks)]
    found = await asyncio.gather(database_problem(engine), *(
        client_problem(rpcs[n.name]) if rpcs and n.name in rpcs else rpc_problem(http, n) for n in networks))
    return {name: problem for name, problem in zip(names, found, strict=True) if problem is not None}


def gate_problems(gates: Mapping[str, asyncio.Event]) -> dict[str, str]:
    """A problem for each of a process's start-up steps not done yet (`charge_executor`: the daemon has
    not registered as the executor of its networks' charges)."""
    return {name: "not started yet" for name, done in gates.items() if not done.is_set()}


class CachedReadiness:
    """The probe's answer, reused for `ttl_s`. Readiness is public and never rate-limited (load balancers
    poll it), so without this anyone could turn requests to it into calls to the lender's paid RPC
    provider; concurrent probes share the one that runs."""

    def __init__(self, ttl_s: float = 2.0) -> None:
        self.ttl_s = ttl_s
        self._answer: dict[str, str] = {}
        self._at: float | None = None  # time.monotonic() of the last probe
        self._lock = asyncio.Lock()

    async def problems(self, engine: AsyncEngine, http: aiohttp.ClientSession, networks: list[NetworkConfig],
                       rpcs: Mapping[str, RpcClient] | None = None) -> dict[str, str]:
        async with self._lock:
            if self._at is None or time.monotonic() - self._at >= self.ttl_s:
                self._answer = await readiness(engine, http, networks, rpcs)
                self._at = time.monotonic()
            return dict(self._answer)
