"""Progress of long block scans (initial sync, backfills): blocks/s and ETA on a terminal, logs otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TextIO

import structlog

log = structlog.get_logger(__name__)


def format_progress(label: str, done: int, total: int, elapsed_s: float) -> str:
    """e.g. 'ethereum sync: 12,000/48,000 blocks (25.0%), 3,000 blocks/s, ETA 0:00:12'."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    pct = 100.0 * done / total if total else 100.0
    eta = timedelta(seconds=round((total - done) / rate)) if rate > 0 else "?"
    return f"{label}: {done:,}/{total:,} blocks ({pct:.1f}%), {rate:,.0f} blocks/s, ETA {eta}"


class Progress:
    """Reports a scan of `total` blocks, at most every `every_s` seconds."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None, every_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = max(total, 0)
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self._clock = clock
        self._started = clock()
        self._last_report = self._started
        self.done = 0

    def advance(self, blocks: int) -> None:
        self.done = min(self.total, self.done + blocks)
        now = self._clock()
        if now - self._last_report >= self.every_s or self.done >= self.total:
            self._last_report = now
            self._report(now)

    def _report(self, now: float) -> None:
        line = format_progress(self.label, self.done, self.total, now - self._started)
        if self.stream.isatty():
            end = "\n" if self.done >= self.total else ""
            self.stream.write("\r" + line + end)
            self.stream.flush()
        else:
            log.info("progress", scan=self.label, done=self.done, total=self.total, line=line)
