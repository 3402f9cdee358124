"""The spec's retry schedule: attempts at once, then +5 min, +30 min, +2 h, +8 h; then `failed`."""

from __future__ import annotations

from datetime import datetime, timedelta

# Delay before attempt n+1 after attempt n fails (attempt 1 is immediate).
RETRY_DELAYS = (timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2), timedelta(hours=8))
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1  # the spec's "Webhook attempts: 5"


def next_attempt_after_failure(attempts_made: int, failed_at: datetime) -> datetime | None:
    """When to try again after the `attempts_made`-th attempt failed at `failed_at`; None: give up."""
    if attempts_made < 1:
        raise ValueError("attempts_made counts the attempt that just failed, so it is at least 1")
    if attempts_made >= MAX_ATTEMPTS:
        return None
    return failed_at + RETRY_DELAYS[attempts_made - 1]


def is_success(status_code: int | None) -> bool:
    """A delivery succeeds on any 2xx answer; anything else (or no answer) is a failed attempt."""
    return status_code is not None and 200 <= status_code < 300
