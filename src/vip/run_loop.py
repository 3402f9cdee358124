"""The run loop shared by the daemon's background tasks (backfills, balances, jobs): step until stopped,
wait a poll when idle, back off on errors without ever dying."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from structlog.typing import FilteringBoundLogger

from vip import metrics
from vip.chain.rpc import RpcError
from vip.errors import ERROR_TEXT_LIMIT

# The stop-aware waits are vip.waits' (the store's listener needs them too); imported from here as well.
from vip.waits import sleep_or_stop as sleep_or_stop
from vip.waits import wake_or_stop as wake_or_stop

EXPECTED_FAILURES = (RpcError, OSError)
BACKOFF_CAP_S = 30.0


def failure_backoff_s(failures: int, base_s: float, max_doublings: int = 6) -> float:
    """How long a loop waits after its `failures`-th failure in a row: `base_s` doubled per failure (at
    most `max_doublings` times), never more than 30 s."""
    return min(BACKOFF_CAP_S, base_s * (1 << min(failures, max_doublings)))


async def run_steps(step: Callable[[], Awaitable[bool]], stop: asyncio.Event, *, network: str | None,
                    task: str, idle_s: float, log: FilteringBoundLogger) -> None:
    """Call `step` until `stop`; it returns False when there was nothing to do. Failures count in the
    network's follower errors, or for a job not bound to one network (`network=None`) in the job errors."""
    failures = 0
    while not stop.is_set():
        try:
            worked = await step()
            failures = 0
        except Exception as exc:
            failures += 1
            if network is None:
                metrics.JOB_ERRORS.labels(task, type(exc).__name__).inc()
            else:
                metrics.FOLLOWER_ERRORS.labels(network, f"{task}_{type(exc).__name__}").inc()
            if isinstance(exc, EXPECTED_FAILURES):
                log.warning(f"{task} step failed", error=str(exc)[:ERROR_TEXT_LIMIT], failures=failures)
            else:
                log.exception(f"{task} step crashed", failures=failures)
            await sleep_or_stop(stop, failure_backoff_s(failures, 0.5))
            continue
        if not worked:
            await sleep_or_stop(stop, idle_s)
