"""One network's RPC budget, in the provider's own unit, shared by everything the daemon asks of it.

Providers bill and throttle per item (every item of a batch counts) and per method: Alchemy in compute
units (`eth_getLogs` 60, `eth_getBlockByNumber` 20, `eth_call` 26), Infura in credits (`eth_getLogs` 255,
most others 80), QuickNode in credits (20 a method on these chains). `config/providers.toml` holds those
weights; a network names its provider and its budget per second in that unit (decision 233).

The budget is a token bucket holding one second of the budget. Callers draw by priority: the follower
first (and the readiness probe), then the jobs that act on the chain (approval confirmation, charges),
then the background work (balances, backfills). The background may only spend what lies above a reserve
of the bucket (`rpc.reserve_for_following`) and the jobs above half of it, so a follower arriving finds
its share waiting: onboarding 100,000 wallets never delays following the chain. A 429 (the provider's view
of the budget, which other processes sharing the key also spend) empties the bucket and halves the rate,
which creeps back with successes; the refused caller itself waits the Retry-After (chain/rpc.py).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from vip import metrics
from vip.config import NetworkConfig, Settings


class Priority(IntEnum):
    """Who draws first (lower first)."""

    FOLLOW = 0  # the live follower; the daemon's readiness probe
    JOBS = 1  # approval confirmation, charges
    BACKGROUND = 2  # balances, backfills


@dataclass
class Bucket:
    """The bucket's arithmetic (pure: the caller passes the time). `level` may go below zero when one
    request costs more than a priority may hold at once; it then waits for the bucket to refill."""

    rate: float  # units per second now (halved on a 429, creeping back to `max_rate`)
    capacity: float  # units held at most (one second of the budget)
    reserve: float  # share of the capacity the background never spends (half of it for the jobs)
    level: float = field(default=-1.0)
    at: float = 0.0
    max_rate: float = field(default=0.0)

    def __post_init__(self) -> None:
        if self.level < 0:
            self.level = self.capacity
        self.max_rate = self.max_rate or self.rate

    def floor(self, priority: Priority) -> float:
        """The level a priority may not spend below."""
        return self.capacity * self.reserve * {Priority.FOLLOW: 0.0, Priority.JOBS: 0.5,
                                               Priority.BACKGROUND: 1.0}[priority]

    def limit(self, priority: Priority) -> float:
        """The most one request of this priority should cost (what a batch is split to)."""
        return self.capacity - self.floor(priority)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = now

    def wait(self, cost: float, priority: Priority, now: float) -> float:
        """Seconds until a request of `cost` may go (0: now). A request costing more than its priority's
        limit goes when the bucket holds that limit (and takes the level below the floor)."""
        self.refill(now)
        need = self.floor(priority) + min(cost, self.limit(priority))
        return max((need - self.level) / self.rate, 0.0)

    def take(self, cost: float) -> None:
        self.level -= cost

    def throttled(self, now: float, min_rate: float) -> None:
        """The provider refused (429): the bucket is emptied and refills at half the rate."""
        self.refill(now)
        self.level = min(self.level, 0.0)
        self.rate = max(min_rate, self.rate / 2)

    def succeeded(self) -> None:
        self.rate = min(self.max_rate, self.rate + self.max_rate / 100)


class RpcBudget:
    """A network's budget: `acquire(cost, priority)` waits until the request may go."""

    def __init__(self, network: str, units_per_s: float, weights: Mapping[str, float], default_weight: float,
                 *, unit: str = "requests", reserve: float = 0.5, min_share: float = 0.05,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.network = network
        self.unit = unit
        self.units_per_s = units_per_s
        self.weights = dict(weights)
        self.default_weight = default_weight
        self.min_rate = units_per_s * min_share
        self._clock = clock
        self.bucket = Bucket(rate=units_per_s, capacity=units_per_s, reserve=reserve, at=clock())
        self._waiters: list[tuple[int, int, float, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self.spent: dict[Priority, float] = dict.fromkeys(Priority, 0.0)

    def weight(self, method: str) -> float:
        return self.weights.get(method, self.default_weight)

    def cost(self, methods: Iterable[str]) -> float:
        return sum(self.weight(m) for m in methods)

    def limit(self, priority: Priority) -> float:
        return self.bucket.limit(priority)

    async def acquire(self, cost: float, priority: Priority) -> None:
        if cost <= 0:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (int(priority), next(self._seq), cost, future))
        started = self._clock()
        self._pump()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.bucket.level += cost  # granted, never sent: give it back
            self._pump()
            raise
        self.spent[priority] += cost
        metrics.RPC_BUDGET_UNITS.labels(self.network, priority.name.lower()).inc(cost)
        metrics.RPC_BUDGET_WAIT.labels(self.network, priority.name.lower()).observe(self._clock() - started)

    def _pump(self) -> None:
        """Grant the waiters the bucket allows, best priority first; set a timer for the next."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiters:
            priority, _, cost, future = self._waiters[0]
            if future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            wait = self.bucket.wait(cost, Priority(priority), self._clock())
            if wait > 0:
                self._timer = asyncio.get_running_loop().call_later(wait, self._pump)
                return
            heapq.heappop(self._waiters)
            self.bucket.take(cost)
            future.set_result(None)

    def on_throttled(self) -> None:
        self.bucket.throttled(self._clock(), self.min_rate)
        self._pump_soon()
        metrics.RPC_BUDGET_RATE.labels(self.network).set(self.bucket.rate)

    def _pump_soon(self) -> None:
        """Re-time the waiters after the bucket changed (outside a running loop there are none)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._pump()

    def on_success(self) -> None:
        if self.bucket.rate < self.bucket.max_rate:
            self.bucket.succeeded()
            metrics.RPC_BUDGET_RATE.labels(self.network).set(self.bucket.rate)


def budget_for(network: NetworkConfig, settings: Settings) -> RpcBudget:
    """The network's budget as configured: its provider's weights and `rpc_budget_per_s` in that unit, or
    `rpc.max_requests_per_s` items per second."""
    billing = settings.providers[network.provider]
    per_s = network.rpc_budget_per_s or settings.rpc.max_requests_per_s
    return RpcBudget(network.name, per_s, billing.weights, billing.default_weight, unit=billing.unit,
                     reserve=settings.rpc.reserve_for_following)
