"""A hosted RPC provider's stand-in: a real local HTTP JSON-RPC server in front of a node (Anvil) that
answers the way Alchemy, Infura, QuickNode or BlockPI answer a client that asks too much.

Tests, benches (bench/history_backfill.py) and anyone trying the indexer against a provider's habits
use it. What a profile reproduces, each number from the provider's public documentation (cited in
PROFILES and in docs/operations.md "Choosing a provider plan"):

- `eth_getLogs` refused past a block-range cap (`range_cap`), or past a result cap (`result_cap`, the
  10,000 logs of Infura and Alchemy) with the provider's own error code, text and suggested range; on
  Alchemy a query of at most `uncapped_range` blocks has no result cap, a wider one any range under it;
- a cap on the values of a filter (`max_filter_values`: Infura's 5,000 parameters);
- a per-second budget in the provider's own unit (`units_per_s`; each method weighs what the provider
  bills for it, `weights`, every item of a batch counted, as the providers count them) answered with HTTP
  429 and `Retry-After`;
- a batch cap (`batch_cap`);
- intermittent 5xx and time-outs (`FaultRates`, seeded);
- load-balanced nodes whose heads differ by a few blocks (`node_lags`; each HTTP request, a whole batch,
  reaches one of them): a lagging node answers with its own head, has no block above it (by number or
  by hash), answers `eth_getLogs` past its head with an empty, error-free result, refuses `eth_getLogs`
  by the hash of a block it lacks (EIP-234's error), and misses the logs of its newest
  `missing_log_blocks` blocks (its log index trails its headers; by hash it reads the block's receipts);
  with `catch_up_s` it has every block out for that long (a quiet chain's nodes converge);
- the `safe` and `finalized` tags: Anvil answers them itself (latest - 32 and latest - 64 with the
  default `--slots-in-an-epoch 32`); `finalized_depth`/`safe_depth` make the stand-in answer them as
  that many blocks behind each node's head instead (a chain's own finality, e.g. an L2's).

Every random draw comes from `random.Random(seed)` under a lock, in arrival order. `calls` counts items
by method, `units` the units of the items it answered (refused requests are not billed), `refusals` the
answers the stand-in made up by kind, `http_requests` the HTTP requests,
`lagged_requests` those a lagging node answered, `transfers_served` the transfers of the Transfers API's
answers.
The server runs on its own thread and event loop, so synchronous code, any asyncio loop and child
processes can all use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from vip.chain.contracts import TRANSFER_TOPIC
from vip.devstack.rpc_front import RpcFrontServer

HEAD_TAGS = ("latest", "pending")
FINALITY_TAGS = ("safe", "finalized")


def _alchemy_results_error(first: int, last: int) -> tuple[int, str]:
    # Text as Alchemy sends it (quoted in github.com/ethers-io/ethers.js/issues/4703).
    return -32602, ("Log response size exceeded. You can make eth_getLogs requests with up to a 2K block "
                    "range and no limit on the response size, or you can request any block range with a "
                    "cap of 10K logs in the response. Based on your parameters and the response size "
                    f"limit, this block range should work: [{hex(first)}, {hex(last)}]")


def _infura_results_error(first: int, last: int) -> tuple[int, str]:
    # docs.metamask.io/services/reference/ethereum/json-rpc-methods/eth_getlogs ("Constraints"); the
    # suggested range as Infura appends it (github.com/ethers-io/ethers.js/issues/4703).
    return -32005, (f"query returned more than 10000 results. Try with this block range "
                    f"[{hex(first)}, {hex(last)}].")


def _quicknode_range_error(cap: int) -> tuple[int, str]:
    # QuickNode's eth_getLogs pages: "the block range limit ... is 10,000 blocks for those on paid plans".
    return -32614, f"eth_getLogs is limited to a {cap:,} range"


def _blockpi_range_error(cap: int) -> tuple[int, str]:
    # As BlockPI answers (quoted in github.com/foundry-rs/foundry/issues/12687).
    return -32602, (f"eth_getLogs is limited to {cap} block range. Please check the parameter requirements "
                    "at https://docs.blockpi.io/documentations/api-reference")


def _generic_range_error(cap: int) -> tuple[int, str]:
    return -32602, f"query exceeds max block range {cap}"


def _generic_results_error(first: int, last: int) -> tuple[int, str]:
    return _infura_results_error(first, last)


@dataclass(frozen=True)
class ProviderProfile:
    """One provider plan's limits. `None`: no such limit. Rates are the stand-in's (scale them to the
    machine); the documented plan figures are in docs/operations.md."""

    name: str
    range_cap: int | None = None
    result_cap: int | None = None
    uncapped_range: int = 0  # queries of at most this many blocks have no result cap (Alchemy: 2,000)
    max_filter_values: int | None = None
    batch_cap: int | None = None
    units_per_s: float | None = None
    # What each method costs in the provider's unit (a method not listed: `default_weight`).
    weights: tuple[tuple[str, int], ...] = ()
    default_weight: int = 1
    range_error: Callable[[int], tuple[int, str]] = _generic_range_error
    results_error: Callable[[int, int], tuple[int, str]] = _generic_results_error
    rate_limit_body: dict[str, Any] = field(default_factory=lambda: {
        "code": 429, "message": "Too Many Requests"})
    # Answers `alchemy_getAssetTransfers` (Alchemy's Transfers API), computed from the node's logs.
    asset_transfers: bool = False
    sources: tuple[str, ...] = ()


PROFILES: dict[str, ProviderProfile] = {
    # Pay-as-you-go on Ethereum, Base, Arbitrum, Polygon: "unlimited" block range (the free tier: 10
    # blocks), "up to a 2K block range and no limit on the response size, or ... any block range with a
    # cap of 10K logs"; 1,000 requests per HTTP batch (under 50 recommended).
    "alchemy": ProviderProfile(
        name="alchemy", result_cap=10_000, uncapped_range=2_000, batch_cap=1_000,
        results_error=_alchemy_results_error, asset_transfers=True, default_weight=20,
        weights=(("eth_chainId", 0), ("eth_blockNumber", 10), ("eth_call", 26), ("eth_getLogs", 60),
                 ("eth_sendRawTransaction", 40), ("alchemy_getAssetTransfers", 120)),
        rate_limit_body={"code": 429, "message": "Your app has exceeded its compute units per second "
                                                 "capacity. If you have retries enabled, you can safely "
                                                 "ignore this message."},
        sources=("https://www.alchemy.com/docs/chains/ethereum/ethereum-api-endpoints/eth-get-logs",
                 "https://www.alchemy.com/docs/reference/batch-requests",
                 "https://www.alchemy.com/docs/best-practices-when-using-alchemy",
                 "https://docs.alchemy.com/alchemy/enhanced-apis/transfers-api",
                 "https://www.alchemy.com/docs/reference/compute-unit-costs",
                 "https://github.com/ethers-io/ethers.js/issues/4703")),
    # No block-range cap; at most 10,000 results, 5,000 parameters and 10 s per query (-32005 with a
    # suggested range); throughput in credits per second answered with HTTP 429 (free tier 500 credits/s).
    "infura": ProviderProfile(
        name="infura", result_cap=10_000, max_filter_values=5_000,
        results_error=_infura_results_error, default_weight=80, weights=(("eth_getLogs", 255),),
        rate_limit_body={"code": 429, "event": -33300, "message": "Too Many Requests",
                         "details": "You have surpassed your user-defined key throughput limit setting."},
        sources=("https://docs.metamask.io/services/reference/ethereum/json-rpc-methods/eth_getlogs",
                 "https://docs.metamask.io/services/how-to/avoid-rate-limiting",
                 "https://docs.metamask.io/services/get-started/pricing",
                 "https://docs.metamask.io/services/how-to/make-batch-requests",
                 "https://docs.metamask.io/services/get-started/pricing/credit-cost")),
    # Paid plans: 10,000 blocks per eth_getLogs (5 on the free trial); credits per second answered with
    # HTTP 429, every item of a batch counted.
    "quicknode": ProviderProfile(
        name="quicknode", range_cap=10_000, range_error=_quicknode_range_error, default_weight=20,
        rate_limit_body={"code": 429, "message": "429 Client Error: Too Many Requests"},
        sources=("https://www.quicknode.com/docs/ethereum/eth_getLogs",
                 "https://www.quicknode.com/docs/polygon/eth_getLogs",
                 "https://support.quicknode.com/articles/2335544672-429-errors-explained",
                 "https://www.quicknode.com/api-credits/eth")),
    # A public/shared endpoint with a small block-range cap (BlockPI: 1,024 blocks).
    "blockpi": ProviderProfile(
        name="blockpi", range_cap=1_024, range_error=_blockpi_range_error,
        sources=("https://github.com/foundry-rs/foundry/issues/12687",)),
    # No limits at all: the node itself (Anvil), for comparison.
    "node": ProviderProfile(name="node"),
}


@dataclass(frozen=True)
class IndexFaults:
    """An index that lies (decision 171): it leaves out the transfers whose transaction hashes are in
    `omit`, and adds `invent` made-up transfers (to the queried `toAddress`, or from the `fromAddress`)
    in blocks of the queried range that have none."""

    omit: frozenset[str] = frozenset()
    invent: int = 0


@dataclass(frozen=True)
class FaultRates:
    """Seeded faults per HTTP request: 502/503 with a text body, or a request held without answer."""

    seed: int = 0
    http_5xx: float = 0.0
    timeout: float = 0.0
    timeout_hold_s: float = 5.0


class _Bucket:
    """Token bucket of `rate` units per second, one second of burst."""

    def __init__(self, rate: float) -> None:
        self.rate, self.tokens, self.at = rate, rate, time.monotonic()

    def take(self, count: int) -> bool:
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < count and self.tokens < self.rate:
            return False
        self.tokens -= count
        return True


def _error(item: dict, code: int, message: str, data: Any = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": item.get("id"), "error": error}


def _result(item: dict, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": item.get("id"), "result": result}


class ProviderStandIn(RpcFrontServer):
    """The stand-in server. `profile` may be a name of PROFILES or a ProviderProfile."""

    thread_name = "provider-stand-in"
    upstream_timeout_s = 120.0

    def __init__(self, upstream_url: str, profile: str | ProviderProfile = "node", *,
                 faults: FaultRates | None = None, node_lags: tuple[int, ...] = (0,),
                 missing_log_blocks: int = 0, finalized_depth: int | None = None,
                 safe_depth: int | None = None, units_per_s: float | None = None,
                 index_faults: IndexFaults | None = None, batch_cap: int | None = None,
                 catch_up_s: float | None = None) -> None:
        base = PROFILES[profile] if isinstance(profile, str) else profile
        self.profile = replace(base, units_per_s=units_per_s or base.units_per_s,
                               batch_cap=batch_cap or base.batch_cap)
        self._weights = dict(self.profile.weights)
        super().__init__(upstream_url)
        self.faults = faults or FaultRates()
        self.node_lags = node_lags
        self.missing_log_blocks = missing_log_blocks
        # A lagging node has every block out for this long, however far it trails while blocks come (a
        # quiet chain's nodes converge); None: it trails forever by its lag.
        self.catch_up_s = catch_up_s
        self._first_seen: dict[int, float] = {}  # real head numbers and when the stand-in first saw them
        self.finalized_depth = finalized_depth
        self.safe_depth = safe_depth
        self.index_faults = index_faults or IndexFaults()
        self._decimals: dict[str, int] = {}
        self.calls: Counter[str] = Counter()
        self.units = 0.0
        self.refusals: Counter[str] = Counter()
        self.http_requests = 0
        self.lagged_requests = 0
        self.transfers_served = 0  # transfers alchemy_getAssetTransfers answered with
        self._rng = random.Random(self.faults.seed)
        self._scripted: deque[int] = deque()  # lags of the nodes the next requests reach, in order
        self._lock = threading.Lock()
        self._bucket = _Bucket(self.profile.units_per_s) if self.profile.units_per_s else None

    def set_faults(self, faults: FaultRates) -> None:
        with self._lock:
            self.faults, self._rng = faults, random.Random(faults.seed)

    def set_nodes(self, node_lags: tuple[int, ...], missing_log_blocks: int = 0) -> None:
        with self._lock:
            self.node_lags, self.missing_log_blocks = node_lags, missing_log_blocks

    def script_nodes(self, *lags: int) -> None:
        """The next HTTP requests reach nodes this many blocks behind, in this order (then the draw from
        `node_lags` resumes): a test decides which node answers which request."""
        with self._lock:
            self._scripted.extend(lags)

    async def _upstream(self, payload: Any) -> Any:
        async with self._session.post(self.upstream_url, data=orjson.dumps(payload),
                                      headers={"Content-Type": "application/json"}) as resp:
            return orjson.loads(await resp.read())

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            parsed = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return web.json_response(_error({}, -32700, "parse error"))
        batch = isinstance(parsed, list)
        items = [i for i in (parsed if batch else [parsed]) if isinstance(i, dict)]
        cost = sum(self._weights.get(str(i.get("method")), self.profile.default_weight) for i in items)
        with self._lock:
            self.http_requests += 1
            self.calls.update(str(i.get("method")) for i in items)
            u_fault, status = self._rng.random(), self._rng.choice((502, 503))
            lag = self._scripted.popleft() if self._scripted else self._rng.choice(self.node_lags)
            self.lagged_requests += lag > 0
            faults, missing = self.faults, self.missing_log_blocks
            throttled = self._bucket is not None and not self._bucket.take(max(cost, 1))
            if not throttled:
                self.units += cost
        profile = self.profile
        if throttled:
            self.refusals["rate_limited"] += 1
            body = {"jsonrpc": "2.0", "id": None if batch else parsed.get("id"),
                    "error": profile.rate_limit_body}
            return web.json_response(body, status=429, headers={"Retry-After": "1"})
        if u_fault < faults.http_5xx:
            self.refusals["http_5xx"] += 1
            return web.Response(status=status, text=f"{status} Bad Gateway: upstream node unavailable")
        if u_fault < faults.http_5xx + faults.timeout:
            self.refusals["timeout"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), faults.timeout_hold_s)
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPGatewayTimeout()
        if batch and profile.batch_cap is not None and len(items) > profile.batch_cap:
            self.refusals["batch_too_large"] += 1
            return web.json_response(_error({}, -32600, f"batch of {len(items)} requests exceeds the "
                                                        f"limit of {profile.batch_cap}"))
        heads = await self._heads(items, lag)
        answers = [await self._answer(item, lag, missing, heads) for item in items]
        out = [a for a, item in zip(answers, items, strict=True) if "id" in item]
        return web.json_response(out if batch else out[0], dumps=lambda o: orjson.dumps(o).decode())

    async def _heads(self, items: list[dict], lag: int) -> dict[str, int]:
        """The real head, this node's head and its finality tags, fetched once per request."""
        replies = await self._upstream([
            {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []},
            {"jsonrpc": "2.0", "id": 2, "method": "eth_getBlockByNumber", "params": ["safe", False]},
            {"jsonrpc": "2.0", "id": 3, "method": "eth_getBlockByNumber", "params": ["finalized", False]},
        ])
        by_id = {r["id"]: r.get("result") for r in replies}
        real = int(by_id[1], 16)
        node = max(real - lag, 0)
        if self.catch_up_s is not None:
            now = time.monotonic()
            with self._lock:
                self._first_seen.setdefault(real, now)
                settled = [n for n, at in self._first_seen.items() if at <= now - self.catch_up_s]
                for n in [n for n in self._first_seen if n < real - 64]:
                    del self._first_seen[n]
            node = min(real, max([node, *settled]))
        tags = {}
        for tag, depth, reply in (("safe", self.safe_depth, by_id[2]), ("finalized", self.finalized_depth,
                                                                          by_id[3])):
            chain = int(reply["number"], 16) if reply else 0
            tags[tag] = min(node - depth if depth is not None else chain, node)
        return {"real": real, "node": node, **tags}

    def _block(self, tag: Any, heads: dict[str, int]) -> int:
        if tag is None or tag in HEAD_TAGS:
            return heads["node"]
        if tag in FINALITY_TAGS:
            return max(heads[tag], 0)
        return 0 if tag == "earliest" else int(tag, 16)

    async def _answer(self, item: dict, lag: int, missing: int, heads: dict[str, int]) -> dict:
        method = item.get("method")
        params = list(item.get("params") or [])
        try:
            if method == "eth_blockNumber":
                return _result(item, hex(heads["node"]))
            if method == "eth_getBlockByNumber" and params:
                number = self._block(params[0], heads)
                if number > heads["node"]:
                    return _result(item, None)
                return await self._forward(item, [hex(number), *params[1:]])
            if method == "eth_getBlockByHash" and params:
                reply = await self._forward(item, params)
                block = reply.get("result")
                if isinstance(block, dict) and int(block["number"], 16) > heads["node"]:
                    return _result(item, None)  # a block this node has not reached
                return reply
            if method == "eth_getLogs" and params and isinstance(params[0], dict):
                return await self._get_logs(item, params[0], lag, missing, heads)
            if method == "alchemy_getAssetTransfers":
                if not self.profile.asset_transfers:
                    return _error(item, -32601, f"the method {method} does not exist/is not available")
                return await self._asset_transfers(item, params[0] if params else {}, heads)
        except (KeyError, TypeError, ValueError):
            pass  # malformed: the node answers it
        return await self._forward(item, params)

    async def _forward(self, item: dict, params: list) -> dict:
        reply = await self._upstream({**item, "params": params})
        return reply if isinstance(reply, dict) else _error(item, -32603, "internal error")

    async def _get_logs(self, item: dict, query: dict, lag: int, missing: int,
                        heads: dict[str, int]) -> dict:
        profile = self.profile
        values = len(query.get("address") or []) if isinstance(query.get("address"), list) else 0
        for topic in query.get("topics") or []:
            values += len(topic) if isinstance(topic, list) else 1
        if profile.max_filter_values is not None and values > profile.max_filter_values:
            self.refusals["too_many_filter_values"] += 1
            return _error(item, -32602, f"filter has {values} topic and address values; at most "
                                        f"{profile.max_filter_values} are accepted")
        if "blockHash" in query:
            block = (await self._upstream({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByHash",
                                           "params": [query["blockHash"], False]})).get("result")
            if not block or int(block["number"], 16) > heads["node"]:
                # EIP-234: a node that does not know the block refuses rather than answer nothing.
                self.refusals["unknown_block_hash"] += 1
                return _error(item, -32000, f"unknown block {query['blockHash']}")
            return await self._forward(item, [query])
        first = self._block(query.get("fromBlock"), heads)
        asked_last = self._block(query.get("toBlock"), heads)
        if profile.range_cap is not None and asked_last - first + 1 > profile.range_cap:
            self.refusals["range_cap"] += 1
            code, message = profile.range_error(profile.range_cap)
            return _error(item, code, message)
        # A lagging node clamps the range to its head without saying so.
        last = min(asked_last, heads["node"])
        if first > last:
            return _result(item, [])
        reply = await self._forward(item, [{**query, "fromBlock": hex(first), "toBlock": hex(last)}])
        logs = reply.get("result")
        if not isinstance(logs, list):
            return reply
        if lag > 0 and missing > 0:
            # Its log index trails its headers: the newest blocks' logs are not there yet.
            visible = heads["node"] - missing
            kept = [lg for lg in logs if int(lg["blockNumber"], 16) <= visible]
            if len(kept) != len(logs):
                self.refusals["logs_missed_by_lagging_node"] += 1
            logs = kept
        if (profile.result_cap is not None and len(logs) > profile.result_cap
                and asked_last - first + 1 > profile.uncapped_range):
            self.refusals["result_cap"] += 1
            # The widest range from `first` whose logs fit under the cap.
            ordered = sorted(int(lg["blockNumber"], 16) for lg in logs)
            fits = max(first, ordered[profile.result_cap] - 1)
            code, message = profile.results_error(first, fits)
            return _error(item, code, message, {"from": hex(first), "to": hex(fits),
                                                "limit": profile.result_cap})
        return _result(item, logs)

    # -- alchemy_getAssetTransfers --------------------------------------------------------------------
    # The request and answer as docs.alchemy.com/alchemy/enhanced-apis/transfers-api documents them:
    # fromBlock/toBlock (hex, inclusive, default 0x0/latest), fromAddress and toAddress ANDed,
    # contractAddresses ORed, category required, maxCount (hex, default 0x3e8), pageKey (a uuid) for the
    # next page; each transfer has blockNum, uniqueId, hash, from, to, value, asset, category and
    # rawContract {value, address, decimal}, and metadata {blockTimestamp} with withMetadata. Only the
    # "erc20" category is served (the tokens' Transfer logs), in ascending block order.

    async def _asset_transfers(self, item: dict, query: dict, heads: dict[str, int]) -> dict:
        categories = query.get("category")
        if not isinstance(categories, list) or not categories:
            return _error(item, -32602, "category is required")
        if set(categories) - {"erc20"}:
            return _error(item, -32602, "the stand-in serves the erc20 category only")
        first = int(query.get("fromBlock") or "0x0", 16)
        last = self._block(query.get("toBlock") or "latest", heads)
        max_count = int(query.get("maxCount") or "0x3e8", 16)
        if not 0 < max_count <= 1000:
            return _error(item, -32602, "maxCount must be between 0x1 and 0x3e8")
        topics: list[Any] = [TRANSFER_TOPIC]
        sender, recipient = query.get("fromAddress"), query.get("toAddress")
        topics.append(_topic(sender) if sender else None)
        topics.append(_topic(recipient) if recipient else None)
        flt: dict[str, Any] = {"fromBlock": hex(first), "toBlock": hex(last), "topics": topics}
        if query.get("contractAddresses"):
            flt["address"] = [a.lower() for a in query["contractAddresses"]]
        reply = await self._upstream({"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [flt]})
        logs = reply.get("result")
        if not isinstance(logs, list):
            return _error(item, -32603, "internal error")
        transfers = [await self._transfer(lg) for lg in logs if len(lg.get("topics") or []) == 3]
        faults = self.index_faults
        transfers = [t for t in transfers if t["hash"] not in faults.omit]
        if faults.invent and (sender or recipient):
            transfers = sorted(transfers + self._invented(first, last, sender, recipient, transfers),
                               key=lambda t: int(t["blockNum"], 16))
        if query.get("withMetadata"):
            stamps = await self._timestamps({int(t["blockNum"], 16) for t in transfers})
            for t in transfers:
                t["metadata"] = {"blockTimestamp": stamps.get(int(t["blockNum"], 16))}
        offset = 0
        if query.get("pageKey"):
            try:
                offset = int(str(query["pageKey"]).rsplit("-", 1)[1], 16)
            except (IndexError, ValueError):
                return _error(item, -32602, "invalid pageKey")
        page = transfers[offset:offset + max_count]
        result: dict[str, Any] = {"transfers": page}
        if offset + max_count < len(transfers):
            # Opaque to the client, uuid-shaped like Alchemy's; the stand-in keeps the offset in it.
            result["pageKey"] = f"7ab1ec5e-0000-4000-8000-{offset + max_count:012x}"
        self.transfers_served += len(page)
        return _result(item, result)

    async def _transfer(self, lg: dict) -> dict:
        token = lg["address"].lower()
        if token not in self._decimals:
            reply = await self._upstream({"jsonrpc": "2.0", "id": 1, "method": "eth_call",
                                          "params": [{"to": token, "data": "0x313ce567"}, "latest"]})
            self._decimals[token] = int(reply.get("result") or "0x0", 16)
        decimals = self._decimals[token]
        raw = int(lg["data"], 16)
        unique_id = f"{lg['transactionHash']}:log:{int(lg['logIndex'], 16)}"
        return {"blockNum": lg["blockNumber"], "uniqueId": unique_id,
                "hash": lg["transactionHash"], "from": "0x" + lg["topics"][1][-40:],
                "to": "0x" + lg["topics"][2][-40:], "value": raw / 10**decimals,
                "erc721TokenId": None, "erc1155Metadata": None, "tokenId": None, "asset": None,
                "category": "erc20",
                "rawContract": {"value": hex(raw), "address": token, "decimal": hex(decimals)}}

    def _invented(self, first: int, last: int, sender: str | None, recipient: str | None,
                  real: list[dict]) -> list[dict]:
        taken = {int(t["blockNum"], 16) for t in real}
        free = [n for n in range(first, last + 1) if n not in taken][:self.index_faults.invent]
        made_up = []
        for n in free:
            tx = "0x" + f"{n:064x}".replace("0", "e")
            made_up.append({"blockNum": hex(n), "uniqueId": f"{tx}:log:0", "hash": tx,
                            "from": (sender or "0x" + "0e" * 20).lower(),
                            "to": (recipient or "0x" + "0e" * 20).lower(), "value": 1_000.0,
                            "erc721TokenId": None, "erc1155Metadata": None, "tokenId": None,
                            "asset": "USDC", "category": "erc20",
                            "rawContract": {"value": hex(10**9), "address": None, "decimal": "0x6"}})
        return made_up

    async def _timestamps(self, numbers: set[int]) -> dict[int, str]:
        if not numbers:
            return {}
        ordered = sorted(numbers)
        replies = await self._upstream([{"jsonrpc": "2.0", "id": i, "method": "eth_getBlockByNumber",
                                         "params": [hex(n), False]} for i, n in enumerate(ordered)])
        stamps = {}
        for reply in replies:
            block = reply.get("result")
            if block:
                when = datetime.fromtimestamp(int(block["timestamp"], 16), UTC)
                stamps[int(block["number"], 16)] = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        return stamps


def _topic(address: str) -> str:
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")
