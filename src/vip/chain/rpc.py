"""Async JSON-RPC client for one network: retries, backoff with jitter, adaptive rate, error taxonomy.

We speak JSON-RPC over aiohttp directly rather than through web3's provider because the indexer needs
the raw error bodies (a provider's "too many results, try [a, b]" hint, HTTP 429) and batch requests,
and because it decodes logs itself into typed rows (`indexer.decode`).
"""

from __future__ import annotations

import asyncio
import itertools
import string
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import orjson
import structlog

from vip import metrics
from vip.chain.budget import Priority, RpcBudget
from vip.chain.range_errors import block_range_cap, is_range_too_large, suggested_range_size
from vip.chain.throttle import backoff_delay
from vip.config import RpcConfig
from vip.errors import ERROR_TEXT_LIMIT
from vip.store.transaction_guard import check_no_transaction

log = structlog.get_logger(__name__)

T = TypeVar("T")


class RpcError(Exception):
    """An RPC call failed. `data` is the error's `data` when it is hex: the revert data of a call or an
    estimate that reverted (the contract's custom error, or an Error(string))."""

    kind = "error"

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message
        self.data: str | None = None


class TransientRpcError(RpcError):
    """5xx, connection error, time-out, internal error: worth retrying."""

    kind = "transient"


class RateLimitedError(TransientRpcError):
    """HTTP 429 or a throttling message; `retry_after_s` is the provider's `Retry-After`, when sent."""

    kind = "rate_limited"

    def __init__(self, method: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(method, message)
        self.retry_after_s = retry_after_s


class RpcTimeoutError(TransientRpcError):
    kind = "timeout"


class RangeTooLargeError(RpcError):
    """eth_getLogs refused the range; `suggested_size` is the provider's hint, when it gave one, and
    `cap` the plan's block-range cap when the refusal states one (range_errors.py)."""

    kind = "range_too_large"

    def __init__(self, method: str, message: str, suggested_size: int | None,
                 cap: int | None = None) -> None:
        super().__init__(method, message)
        self.suggested_size = suggested_size
        self.cap = cap


class NodeBehindError(RpcError):
    """The node has not reached a block we asked about (a lagging node behind a load balancer)."""

    kind = "node_behind"


class RpcCallError(RpcError):
    """A JSON-RPC error that retrying will not fix (invalid params, unknown method)."""

    kind = "call_error"


class RevertedError(RpcCallError):
    """The call or estimate reverted in the EVM (JSON-RPC code 3, "execution reverted"): the same call on
    the same state reverts again, so it is never retried; `data` holds the revert data."""

    kind = "reverted"


_ids = itertools.count(1)


def _retry_after_s(value: str | None) -> float | None:
    """`Retry-After` in seconds (providers send delta-seconds; an HTTP date is ignored)."""
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None

_RATE_LIMIT_MARKERS = ("rate limit", "too many requests", "compute units", "capacity", "throttl")


def _revert_data(error: dict[str, Any]) -> str | None:
    """The revert data of an error reply: `data` as a hex string (geth, Anvil), or nested as
    `data.data` (some providers)."""
    data = error.get("data")
    if isinstance(data, dict):
        data = data.get("data")
    if isinstance(data, str) and data.startswith("0x") and all(c in string.hexdigits for c in data[2:]):
        return data.lower()
    return None


def _classify(method: str, params: list[Any], error: dict[str, Any]) -> RpcError:
    classified = _classified(method, params, error)
    classified.data = _revert_data(error)
    return classified


def _classified(method: str, params: list[Any], error: dict[str, Any]) -> RpcError:
    message = str(error.get("message", error))
    code = error.get("code")
    lowered = message.lower()
    if "beyond current head" in lowered or "after last accepted block" in lowered:
        return NodeBehindError(method, message)
    # Rate limits first: their wording ("too many requests", "exceeded ... capacity") overlaps with
    # range errors, and a throttle must slow us down rather than shrink the range.
    if code == 429 or any(m in lowered for m in _RATE_LIMIT_MARKERS):
        return RateLimitedError(method, message)
    if method == "eth_getLogs" and (code == -32005 or is_range_too_large(message)):
        start = params[0].get("fromBlock", "0x0") if params else "0x0"
        return RangeTooLargeError(method, message, suggested_range_size(message, int(start, 16)),
                                  block_range_cap(message))
    if code in (-32600, -32601, -32602):
        return RpcCallError(method, message)
    if code == 3 or lowered.startswith("execution reverted"):
        return RevertedError(method, message)
    return TransientRpcError(method, message)


class _Session:
    """The HTTP session a client and its priority views share."""

    def __init__(self, config: RpcConfig) -> None:
        self.config = config
        self.http: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self.http is None or self.http.closed:
            self.http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
                connector=aiohttp.TCPConnector(limit=16, force_close=False),
            )
        return self.http


class RpcClient:
    """JSON-RPC over HTTP for one network endpoint, drawing every item from the network's budget
    (`chain.budget`) at this client's priority. `at(priority)` is a view of the same client (one session,
    one budget) for another caller."""

    def __init__(self, network: str, url: str, config: RpcConfig, budget: RpcBudget | None = None,
                 priority: Priority = Priority.FOLLOW, *, _session: _Session | None = None) -> None:
        self.network = network
        self.url = url
        self.config = config
        # Without a configured budget: the service-wide `rpc.max_requests_per_s`, every item one unit.
        self.budget = budget if budget is not None else RpcBudget(
            network, config.max_requests_per_s, {}, 1.0, reserve=config.reserve_for_following)
        self.priority = priority
        self._owner = _session is None
        self._session = _session if _session is not None else _Session(config)

    def at(self, priority: Priority) -> RpcClient:
        """This client for a caller of another priority (same session, same budget)."""
        return RpcClient(self.network, self.url, self.config, self.budget, priority, _session=self._session)

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owner and self._session.http is not None:
            await self._session.http.close()

    def batch_limits(self) -> tuple[int, float]:
        """The most items and budget units one HTTP request of this caller may carry."""
        return self.config.max_batch_size, self.budget.limit(self.priority)

    def weight(self, method: str) -> float:
        return self.budget.weight(method)

    async def _post(self, payload: Any, label: str, cost: float) -> Any:
        """One HTTP round trip; raises a classified error for HTTP/transport failures."""
        check_no_transaction(f"rpc {label}", network=self.network)
        await self.budget.acquire(cost, self.priority)
        metrics.RPC_REQUESTS.labels(self.network, label).inc()
        started = time.perf_counter()
        try:
            async with self._session.get().post(
                self.url, data=orjson.dumps(payload), headers={"Content-Type": "application/json"}
            ) as resp:
                body = await resp.read()
                if resp.status == 429:
                    raise RateLimitedError(label, f"HTTP 429 {body[:ERROR_TEXT_LIMIT]!r}",
                                           _retry_after_s(resp.headers.get("Retry-After")))
                if resp.status >= 400:
                    raise TransientRpcError(label, f"HTTP {resp.status} {body[:ERROR_TEXT_LIMIT]!r}")
                return orjson.loads(body)
        except TimeoutError as exc:
            raise RpcTimeoutError(label, f"timed out after {self.config.timeout_s}s") from exc
        except (aiohttp.ClientError, orjson.JSONDecodeError) as exc:
            raise TransientRpcError(label, f"{type(exc).__name__}: {exc}") from exc
        finally:
            metrics.RPC_LATENCY.labels(self.network, label).observe(time.perf_counter() - started)

    async def _with_retries(self, label: str, attempt_once: Callable[[], Awaitable[T]],
                            max_attempts: int | None) -> T:
        attempts = max_attempts or self.config.max_attempts
        for attempt in range(attempts):
            try:
                result = await attempt_once()
            except RpcError as exc:
                # The failing item's method (an eth_getLogs refused inside a batch counts as eth_getLogs).
                metrics.RPC_ERRORS.labels(self.network, exc.method, exc.kind).inc()
                if isinstance(exc, RateLimitedError):
                    # The provider's view of the budget (other processes on the key spend it too): the
                    # network's bucket empties and refills at half the rate, for every caller.
                    self.budget.on_throttled()
                if not isinstance(exc, TransientRpcError) or attempt + 1 >= attempts:
                    raise
                delay = backoff_delay(attempt, self.config.backoff_base_s, self.config.backoff_cap_s)
                if isinstance(exc, RateLimitedError) and exc.retry_after_s is not None:
                    # The provider said when it will take requests again: asking sooner only earns
                    # another 429 (and, on some plans, counts against the quota).
                    delay = max(delay, min(exc.retry_after_s, self.config.retry_after_cap_s))
                log.warning("rpc retry", network=self.network, method=label, attempt=attempt + 1,
                            error=exc.message[:ERROR_TEXT_LIMIT], delay_s=round(delay, 3))
                await asyncio.sleep(delay)
            else:
                self.budget.on_success()
                return result
        raise AssertionError("unreachable")

    async def call(self, method: str, params: list[Any] | None = None, *,
                   max_attempts: int | None = None) -> Any:
        params = params or []

        async def once() -> Any:
            reply = await self._post({"jsonrpc": "2.0", "id": next(_ids), "method": method,
                                      "params": params}, method, self.weight(method))
            if "error" in reply:
                raise _classify(method, params, reply["error"])
            return reply.get("result")

        return await self._with_retries(method, once, max_attempts)

    def split(self, calls: list[tuple[str, list[Any]]]) -> list[list[tuple[str, list[Any]]]]:
        """`calls` cut into HTTP requests of at most `rpc.max_batch_size` items and of at most what this
        caller's budget allows one request to cost."""
        items, units = self.batch_limits()
        chunks: list[list[tuple[str, list[Any]]]] = []
        cost = 0.0
        for call in calls:
            weight = self.weight(call[0])
            if not chunks or len(chunks[-1]) >= items or (cost + weight > units and chunks[-1]):
                chunks.append([])
                cost = 0.0
            chunks[-1].append(call)
            cost += weight
        return chunks

    async def batch(self, calls: list[tuple[str, list[Any]]], *,
                    max_attempts: int | None = None) -> list[Any]:
        """Several calls, results in order: one HTTP request per chunk of `split` (each chunk may reach
        another node behind a load balancer; use `batch_one` when the answers must come from one node).
        Any failed item fails the batch."""
        results: list[Any] = []
        for chunk in self.split(calls):
            results += await self.batch_one(chunk, max_attempts=max_attempts)
        return results

    async def batch_one(self, calls: list[tuple[str, list[Any]]], *,
                        max_attempts: int | None = None) -> list[Any]:
        """Several calls in one HTTP request (so one node answers them all), results in order; the caller
        keeps it within `batch_limits`. Any failed item fails the batch."""
        if not calls:
            return []
        label = calls[0][0] if len({m for m, _ in calls}) == 1 else "batch"
        cost = self.budget.cost(m for m, _ in calls)

        async def once() -> list[Any]:
            first = next(_ids)
            payload = [{"jsonrpc": "2.0", "id": first + i, "method": m, "params": p}
                       for i, (m, p) in enumerate(calls)]
            for _ in range(len(calls) - 1):
                next(_ids)
            reply = await self._post(payload, label, cost)
            if not isinstance(reply, list):
                error = reply.get("error", {"message": "batch answered with a single object"})
                raise _classify(label, [], error)
            by_id = {item.get("id"): item for item in reply}
            results: list[Any] = []
            for i, (method, params) in enumerate(calls):
                item = by_id.get(first + i)
                if item is None:
                    raise TransientRpcError(label, "batch reply is missing an item")
                if "error" in item:
                    raise _classify(method, params, item["error"])
                results.append(item.get("result"))
            return results

        return await self._with_retries(label, once, max_attempts)

    # --- typed helpers ---------------------------------------------------------------------------

    async def chain_id(self) -> int:
        return int(await self.call("eth_chainId"), 16)

    async def block_number(self) -> int:
        return int(await self.call("eth_blockNumber"), 16)

    async def get_blocks(self, numbers: list[int]) -> list[dict[str, Any] | None]:
        """Blocks (without transactions) by number; None where the node has no such block."""
        return await self.batch([("eth_getBlockByNumber", [hex(n), False]) for n in numbers])

    async def get_logs(self, filter_params: dict[str, Any]) -> list[dict[str, Any]]:
        # Two attempts only: a persistent failure should shrink the range, which the caller does.
        logs: list[dict[str, Any]] = await self.call("eth_getLogs", [filter_params], max_attempts=2)
        return logs
