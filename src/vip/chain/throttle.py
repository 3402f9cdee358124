"""Backoff between retries (the request rate itself is the network's budget: chain/budget.py)."""

from __future__ import annotations

import random


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    ceiling = min(cap, base * (2**attempt))
    return (rng or random).uniform(0, ceiling)
