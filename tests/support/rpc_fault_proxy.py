"""A fault-injecting JSON-RPC reverse proxy for testing the indexer against a real node (Anvil).

`RpcFaultProxy` listens on 127.0.0.1 (in a background thread with its own event loop, so synchronous
code, async code in any loop and subprocesses can all use it) and forwards every request to the
upstream node, except when the `FaultPlan` says to inject a fault.  Each fault mirrors something
real RPC providers do, and the indexer must stay complete and exact through all of them:

HTTP-level (decided once per HTTP request, a batch included; at most one of these per request):
- `http_error`: HTTP 500/502/503 with a text body, like a provider's gateway or a crashed backend.
- `rate_limited`: HTTP 429 with `Retry-After: 1` and a JSON-RPC-ish error body (per-second caps).
- `timeout`: hold the request for `timeout_hold_s` seconds, then close without answering; the
  client's own timeout must fire first (an overloaded node that never replies).
- `dropped`: close the TCP connection with no HTTP response at all (a load balancer resetting).

RPC-level (decided per JSON-RPC item, so one item of a batch can fail while the others succeed):
- `rpc_error`: HTTP 200 carrying `{"code": -32603, "message": "internal error"}`.
- `too_many_results`: only for `eth_getLogs` spanning more than `too_many_results_max_range`
  blocks: the -32005 "query returned more than 10000 results" error with a suggested smaller
  range, as Infura-style providers answer (clients are expected to split the range).
- `lag_start`: start an episode of `lag_requests` items answered as by a node `lag_blocks` behind
  the head, like one stale backend behind a load balancer: `eth_blockNumber` answers the lagged
  head, `eth_getBlockByNumber` above it answers null ("latest" means the lagged head), and
  `eth_getLogs` reaching above it errors with -32000 ("latest" again means the lagged head).

Every random decision comes from `random.Random(plan.seed)`, drawn in a fixed order for each
incoming HTTP request (in arrival order), so a seed replays the same faults over the same request
sequence.  Injected faults are recorded in `injected` as (request number, method, kind): the
number is 1-based over every HTTP request received (`requests`), the method is the item's (for an
HTTP-level fault on a batch, its methods joined by ","), and `kind` is the plan's probability name,
except that answers altered by a lag episode are recorded as "lag".  `counts` counts them by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from vip.devstack.rpc_front import RpcFrontServer

HTTP_FAULTS = ("http_error", "rate_limited", "timeout", "dropped")
HEAD_TAGS = (None, "latest", "pending", "safe", "finalized")


@dataclass(frozen=True)
class FaultPlan:
    seed: int
    http_error: float = 0.0
    rate_limited: float = 0.0
    timeout: float = 0.0
    dropped: float = 0.0
    rpc_error: float = 0.0
    too_many_results: float = 0.0
    lag_start: float = 0.0
    timeout_hold_s: float = 30.0
    too_many_results_max_range: int = 50
    lag_requests: int = 8
    lag_blocks: int = 3

    def __post_init__(self) -> None:
        if sum(getattr(self, kind) for kind in HTTP_FAULTS) > 1.0:
            raise ValueError("the HTTP-level fault probabilities must sum to at most 1")


def _error(item: dict, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": item.get("id"), "error": {"code": code, "message": message}}


def _block(tag: Any, head: int) -> int:
    return head if tag in HEAD_TAGS else 0 if tag == "earliest" else int(tag, 16)


class RpcFaultProxy(RpcFrontServer):
    thread_name = "rpc-fault-proxy"

    def __init__(self, upstream_url: str, plan: FaultPlan) -> None:
        super().__init__(upstream_url)
        self.injected: list[tuple[int, str, str]] = []
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self._lock = threading.Lock()
        self._paused = 0
        self.set_plan(plan)

    # -- control (any thread) ------------------------------------------------------------------
    @property
    def plan(self) -> FaultPlan:
        return self._plan

    def set_plan(self, plan: FaultPlan) -> None:
        """Switch to a new plan; its random sequence starts afresh and any lag episode ends."""
        with self._lock:
            self._plan, self._rng, self._lag_left = plan, random.Random(plan.seed), 0

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No faults (and no random draws) while inside; requests are still forwarded and counted."""
        with self._lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1

    def _record(self, number: int, method: str, kind: str) -> None:
        self.injected.append((number, method, kind))
        self.counts[kind] += 1

    async def _post(self, body: bytes) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        try:
            async with self._session.post(self.upstream_url, data=body, headers=headers) as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            return 502, f"proxy: upstream unreachable: {exc!r}".encode()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        batch = isinstance(parsed, list)
        items = [i for i in (parsed if batch else [parsed]) if isinstance(i, dict)]
        methods = [str(i.get("method")) for i in items]
        # All random draws for this request happen here, in one fixed order, under the lock.
        with self._lock:
            self.requests += 1
            number, plan, active = self.requests, self._plan, not self._paused and bool(items)
            if active:
                u_http, status = self._rng.random(), self._rng.choice((500, 502, 503))
                draws = [(self._rng.random(), self._rng.random(), self._rng.random()) for _ in items]
                lagged = []
                for _, _, u_lag in draws:
                    if self._lag_left == 0 and u_lag < plan.lag_start:
                        self._lag_left = plan.lag_requests
                    lagged.append(self._lag_left > 0)
                    self._lag_left = max(self._lag_left - 1, 0)
        if not active:  # paused, or not JSON-RPC: the node answers whatever it is
            return self._reply(*await self._post(body))

        threshold = 0.0
        for kind in HTTP_FAULTS:
            threshold += getattr(plan, kind)
            if u_http < threshold:
                self._record(number, ",".join(methods), kind)
                return await self._http_fault(request, kind, status, plan)

        head: list[int] = []  # the real head, fetched at most once per request

        async def real_head() -> int:
            if not head:
                _, reply = await self._post(orjson.dumps(
                    {"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}))
                head.append(int(orjson.loads(reply)["result"], 16))
            return head[0]

        answers: list[dict | None] = [None] * len(items)  # a synthesized answer, or None: forward
        sent = list(items)  # what to forward (possibly rewritten by a lag episode)
        for n, (item, method) in enumerate(zip(items, methods, strict=True)):
            u_rpc, u_many, _ = draws[n]
            params = item.get("params") or [None]
            kind = None
            try:
                if u_rpc < plan.rpc_error:
                    answers[n], kind = _error(item, -32603, "internal error"), "rpc_error"
                if kind is None and u_many < plan.too_many_results and method == "eth_getLogs":
                    answers[n] = await self._too_many(item, params[0], plan, real_head)
                    kind = "too_many_results" if answers[n] else None
                if kind is None and lagged[n]:
                    answers[n], sent[n] = self._lag(item, method, params, await real_head() - plan.lag_blocks)
                    kind = "lag" if answers[n] or sent[n] is not item else None
            except (AttributeError, KeyError, TypeError, ValueError):
                kind, answers[n], sent[n] = None, None, item  # malformed: let the node answer it
            if kind:
                self._record(number, method, kind)

        if all(a is None for a in answers) and all(s is i for s, i in zip(sent, items, strict=True)):
            return self._reply(*await self._post(body))  # untouched: pass the body through as is
        forward = [s for s, a in zip(sent, answers, strict=True) if a is None]
        replies: dict[bytes, list] = {}
        if forward:
            status, reply = await self._post(orjson.dumps(forward if batch else forward[0]))
            try:
                decoded = orjson.loads(reply)
            except orjson.JSONDecodeError:
                return self._reply(status, reply)
            for r in decoded if isinstance(decoded, list) else [decoded]:
                replies.setdefault(orjson.dumps(r.get("id")), []).append(r)
        out = [a if a is not None else (replies.get(orjson.dumps(s.get("id"))) or [None]).pop(0)
               for s, a in zip(sent, answers, strict=True) if "id" in s]
        return self._reply(200, orjson.dumps(out if batch else out[0]))

    @staticmethod
    async def _too_many(item: dict, query: dict, plan: FaultPlan, real_head) -> dict | None:
        """The "too many results" error for a getLogs query wider than the plan allows, else None."""
        if "blockHash" in query:
            return None
        tags = (query.get("fromBlock"), query.get("toBlock"))
        head = await real_head() if any(t in HEAD_TAGS for t in tags) else 0
        first, last = (_block(t, head) for t in tags)
        if last - first + 1 <= plan.too_many_results_max_range:
            return None
        suggested = f"[{hex(first)}, {hex(first + plan.too_many_results_max_range - 1)}]"
        message = f"query returned more than 10000 results. Try with this block range {suggested}."
        return _error(item, -32005, message)

    @staticmethod
    def _lag(item: dict, method: str, params: list, lagged_head: int) -> tuple[dict | None, dict]:
        """(synthesized answer or None, the item to forward) as a node whose head is `lagged_head`."""
        lagged_head = max(lagged_head, 0)
        hexed = hex(lagged_head)
        if method == "eth_blockNumber":
            return {"jsonrpc": "2.0", "id": item.get("id"), "result": hexed}, item
        if method == "eth_getBlockByNumber":
            if params[0] in HEAD_TAGS:
                return None, {**item, "params": [hexed, *params[1:]]}
            if params[0] != "earliest" and int(params[0], 16) > lagged_head:
                return {"jsonrpc": "2.0", "id": item.get("id"), "result": None}, item
        if method == "eth_getLogs" and "blockHash" not in params[0]:
            query = dict(params[0])
            for key in ("fromBlock", "toBlock"):
                if query.get(key) in HEAD_TAGS:
                    query[key] = hexed
            if _block(query["toBlock"], lagged_head) > lagged_head:
                return _error(item, -32000, "block range extends beyond current head block"), item
            if query != params[0]:
                return None, {**item, "params": [query, *params[1:]]}
        return None, item

    @staticmethod
    def _reply(status: int, body: bytes) -> web.Response:
        content_type = "application/json" if status == 200 else "text/plain"
        return web.Response(status=status, body=body, content_type=content_type)

    async def _http_fault(self, request: web.Request, kind: str, status: int, plan: FaultPlan):
        if kind == "http_error":
            return web.Response(status=status, text=f"{status} injected fault: upstream unavailable")
        if kind == "rate_limited":
            body = orjson.dumps({"jsonrpc": "2.0", "id": None,
                                 "error": {"code": 429, "message": "Too Many Requests: rate limit exceeded"}})
            return web.Response(status=429, body=body, content_type="application/json",
                                headers={"Retry-After": "1"})
        if kind == "timeout":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), plan.timeout_hold_s)
        # timeout (after the hold) and dropped: close the connection without any response.  Writing
        # the exception's response to the aborted transport fails, which aiohttp treats as a
        # client disconnection, so nothing is sent and nothing is logged as an error.
        if request.transport is not None:
            request.transport.abort()
        raise web.HTTPServiceUnavailable()
