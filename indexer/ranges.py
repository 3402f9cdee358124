"""Block-range arithmetic for `eth_getLogs`: pure functions and a small adaptive sizer."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Providers that refuse a wide eth_getLogs often say which range would work, e.g.
#   "query returned more than 10000 results. Try with this block range [0x1e2a3b, 0x1e2ad5]."
#   "Log response size exceeded. ... this block range should work: [0x1e2a3b, 0x1e2ad5]"
_SUGGESTED_RANGE = re.compile(r"\[\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*(0x[0-9a-fA-F]+|\d+)\s*\]")
#   "block range is too wide, maximum is 2000" / "exceed maximum block range: 2000"
_MAX_RANGE = re.compile(r"(?:max(?:imum)?[^0-9]{0,40}?range|range[^0-9]{0,40}?(?:limit|max(?:imum)?))"
                        r"[^0-9]{0,20}(\d+)", re.IGNORECASE)
_TOO_LARGE_MARKERS = (
    "more than",
    "too many",
    "response size",
    "range too",
    "block range",
    "limit exceeded",
    "query timeout",
    "exceed",
)


def _to_int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def is_range_too_large(message: str) -> bool:
    """Whether an eth_getLogs error message means 'ask for fewer blocks'."""
    lowered = message.lower()
    if "beyond current head" in lowered or "after last accepted block" in lowered:
        return False
    return any(marker in lowered for marker in _TOO_LARGE_MARKERS)


def suggested_range_size(message: str, from_block: int) -> int | None:
    """The block count a provider's error suggests for a query starting at `from_block`, if any."""
    match = _SUGGESTED_RANGE.search(message)
    if match:
        start, end = _to_int(match.group(1)), _to_int(match.group(2))
        if end >= start:
            # The suggestion is anchored at the provider's view of our start; keep only its width.
            return end - start + 1
    match = _MAX_RANGE.search(message)
    if match:
        size = int(match.group(1))
        return size if size > 0 else None
    del from_block
    return None


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
    """Block-range size for eth_getLogs: grows after successes, halves on failures, obeys hints."""

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
        self.size = max(self.minimum, min(self.maximum, size))
