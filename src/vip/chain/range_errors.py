"""What a provider's `eth_getLogs` refusal says: too wide a range, and which range would work."""

from __future__ import annotations

import re

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
