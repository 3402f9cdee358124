"""Adaptive request rate per RPC endpoint (additive increase, multiplicative decrease) and backoff."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable


class AdaptiveRateLimiter:
    """Spaces requests to at most `rate` per second; halves the rate on 429/time-outs, creeps back up."""

    def __init__(
        self,
        max_rate: float,
        min_rate: float,
        increase_per_success: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_rate = max_rate
        self.min_rate = min(min_rate, max_rate)
        self.rate = max_rate
        self.increase_per_success = increase_per_success
        self._clock = clock
        self._next_slot = 0.0
        self._lock = asyncio.Lock()

    def reserve(self) -> float:
        """Take the next slot; return how long to wait for it (pure bookkeeping, no sleeping)."""
        now = self._clock()
        slot = max(now, self._next_slot)
        self._next_slot = slot + 1.0 / self.rate
        return slot - now

    async def acquire(self) -> None:
        async with self._lock:
            delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

    def on_success(self) -> None:
        self.rate = min(self.max_rate, self.rate + self.increase_per_success)

    def on_throttled(self) -> None:
        self.rate = max(self.min_rate, self.rate / 2)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    ceiling = min(cap, base * (2**attempt))
    return (rng or random).uniform(0, ceiling)
