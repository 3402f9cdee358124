"""Block-range arithmetic for `eth_getLogs`: pure functions and a small adaptive sizer."""

from __future__ import annotations

from dataclasses import dataclass


def finalized_block(head: int, finality_depth: int) -> int:
    """Highest block treated as final: `finality_depth` confirmations behind the head."""
    return head - finality_depth


def next_range(cursor: int, head: int, size: int) -> tuple[int, int] | None:
    """The next [from, to] after `cursor`, at most `size` blocks, never past `head`."""
    start = cursor + 1
    if start > head:
        return None
    return start, min(head, start + size - 1)


@dataclass
class AdaptiveRange:
    """Block-range size for eth_getLogs: starts large, grows after successes, halves on failures, takes
    a provider's suggested range, and never again passes a block-range cap the provider stated."""

    size: int
    maximum: int
    minimum: int = 1
    growth: float = 2.0

    def __post_init__(self) -> None:
        self.size = max(self.minimum, min(self.size, self.maximum))

    def succeeded(self, logs_returned: int, target_logs: int) -> None:
        """Grow unless this range already brought back about as many logs as a batch should hold."""
        if logs_returned < target_logs // 2:
            self.size = min(self.maximum, max(self.size + 1, int(self.size * self.growth)))

    def failed(self) -> None:
        self.size = max(self.minimum, self.size // 2)

    def suggest(self, size: int) -> None:
        """A width that works here (sized by results): taken now, grown from later."""
        self.size = max(self.minimum, min(self.maximum, size))

    def cap(self, size: int) -> None:
        """The provider's block-range cap: the most ever asked from now on."""
        self.maximum = max(self.minimum, min(self.maximum, size))
        self.size = min(self.size, self.maximum)


# --- many bisections at once (start blocks of pending backfills) -------------------------------------

Bounds = dict[int, tuple[int, int]]  # target timestamp -> [lo, hi) of the block searched


def bisection_probes(bounds: Bounds) -> list[int]:
    """The blocks whose timestamps the next round of every unfinished search needs, each once: searches
    for nearby targets share most of their probes."""
    return sorted({(lo + hi) // 2 for lo, hi in bounds.values() if lo < hi})


def narrow_bisections(bounds: Bounds, stamps: dict[int, int]) -> Bounds:
    """Each unfinished search narrowed by the timestamp of its middle block (from `stamps`): the first
    block at or after the target is in the returned [lo, hi); a search with lo == hi is done, at lo."""
    narrowed = {}
    for target, (lo, hi) in bounds.items():
        if lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if stamps[mid] >= target else (mid + 1, hi)
        narrowed[target] = (lo, hi)
    return narrowed
