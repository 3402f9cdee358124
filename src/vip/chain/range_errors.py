"""What a provider's `eth_getLogs` refusal says: too wide a range, and which range would work.

Two kinds of hint, kept apart because they call for different reactions (decision 145):
- a *suggested range* sized by the results it would hold ("query returned more than 10000 results. Try
  with this block range [a, b]"): a width for this part of the chain only; denser or sparser stretches
  take other widths, so the sizer may grow again after it;
- a *block-range cap* ("query exceeds max block range 100000", "eth_getLogs is limited to a 10,000
  range"): a ceiling of the plan that holds everywhere, so the sizer never asks past it again.
The stand-in provider (vip.devstack.provider) answers with these exact texts; keep both in step.
"""

from __future__ import annotations

import re

# Providers that refuse a wide eth_getLogs often say which range would work, e.g.
#   "query returned more than 10000 results. Try with this block range [0x1e2a3b, 0x1e2ad5]."
#   "Log response size exceeded. ... this block range should work: [0x1e2a3b, 0x1e2ad5]"
_SUGGESTED_RANGE = re.compile(r"\[\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*(0x[0-9a-fA-F]+|\d+)\s*\]")
#   "query exceeds max results 20000, retry with the range 23879634-23879696"
_RETRY_WITH_RANGE = re.compile(r"retry with the range\s+(\d+)\s*-\s*(\d+)", re.IGNORECASE)
_NUMBER = r"(\d[\d,]*)\s*([kK])?"
# Block-range caps, e.g. "block range is too wide, maximum is 2000", "exceed maximum block range: 2000",
# "query exceeds max block range 100000", "eth_getLogs range is too large, max is 1k blocks",
# "eth_getLogs is limited to 1024 block range", "eth_getLogs is limited to a 10,000 range".
_MAX_RANGES = (
    re.compile(r"(?:max(?:imum)?[^0-9]{0,40}?range|range[^0-9]{0,40}?(?:limit|max(?:imum)?))"
               r"[^0-9]{0,20}?" + _NUMBER, re.IGNORECASE),
    re.compile(r"limited to (?:a )?" + _NUMBER + r"\s*(?:block )?range", re.IGNORECASE),
)
_TOO_LARGE_MARKERS = (
    "more than",
    "too many",
    "response size",
    "range too",
    "block range",
    "limit exceeded",
    "query timeout",
    "exceed",
    "range is too large",
    "limited to",
    "max results",
)


def _to_int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _number(digits: str, kilo: str | None) -> int:
    return int(digits.replace(",", "")) * (1000 if kilo else 1)


def is_range_too_large(message: str) -> bool:
    """Whether an eth_getLogs error message means 'ask for fewer blocks'."""
    lowered = message.lower()
    if "beyond current head" in lowered or "after last accepted block" in lowered:
        return False
    return any(marker in lowered for marker in _TOO_LARGE_MARKERS)


def _suggested_width(message: str) -> int | None:
    for pattern in (_SUGGESTED_RANGE, _RETRY_WITH_RANGE):
        match = pattern.search(message)
        if match:
            start, end = _to_int(match.group(1)), _to_int(match.group(2))
            if end >= start:
                # The suggestion is anchored at the provider's view of our start; keep only its width.
                return end - start + 1
    return None


def block_range_cap(message: str) -> int | None:
    """The plan's block-range cap a refusal states, when it states one and suggests no range."""
    if _suggested_width(message) is not None:
        return None
    for pattern in _MAX_RANGES:
        match = pattern.search(message)
        if match:
            size = _number(match.group(1), match.group(2))
            return size if size > 0 else None
    return None


def suggested_range_size(message: str, from_block: int) -> int | None:
    """The block count a provider's error suggests for a query starting at `from_block`, if any: its
    suggested range's width, else its stated block-range cap."""
    del from_block
    suggested = _suggested_width(message)
    return suggested if suggested is not None else block_range_cap(message)
