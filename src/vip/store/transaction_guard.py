"""No network call while the calling task holds an open database transaction.

A transaction that waits on an RPC provider or a webhook receiver holds its row locks (and a pooled
connection) for as long as the far side takes: one slow provider then serialises every request that needs
those rows. The rule is: read from the network first, then open the transaction, lock and re-check.

Every engine made by `vip.store.engine.create_engine` reports its transactions here (SQLAlchemy's
`begin`, `commit` and `rollback` events, keyed by the asyncio task that runs them); every outbound call of
ours (`vip.chain.rpc`, webhook deliveries, platform OAuth, the contract-wallet check of sign-in) asks
`check_no_transaction` first. In production a violation is logged with the call and counted; the test
suite switches the guard to `raise`, so a test that drives such a path fails.

Autocommit connections hold no transaction (each statement commits on its own) and are not counted.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any, Literal

import structlog
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics

if TYPE_CHECKING:
    import aiohttp

log = structlog.get_logger(__name__)

Mode = Literal["log", "raise"]
_mode: Mode = "log"

# The sync connections whose transaction is open, per task. Weak on both sides: a finished task or a
# discarded connection drops out by itself, so a transaction ended without its event (a connection
# invalidated by a lost server) can never leave a task marked for good.
_open: weakref.WeakKeyDictionary[asyncio.Task[Any], weakref.WeakSet[Connection]] = weakref.WeakKeyDictionary()


class TransactionHeldAcrossNetworkCall(RuntimeError):
    """A network call was made while the calling task held an open database transaction."""


def set_mode(mode: Mode) -> None:
    """`log` (production: log and count) or `raise` (tests: fail the call)."""
    global _mode
    _mode = mode


def _task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: a synchronous caller (migrations, the CLI's sync parts)
        return None


def _began(conn: Connection) -> None:
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return
    task = _task()
    if task is not None:
        _open.setdefault(task, weakref.WeakSet()).add(conn)


def _ended(conn: Connection) -> None:
    task = _task()
    held = _open.get(task) if task is not None else None
    if held is not None:
        held.discard(conn)


def watch(engine: AsyncEngine) -> None:
    """Report `engine`'s transactions to the guard."""
    sync = engine.sync_engine
    event.listen(sync, "begin", _began)
    event.listen(sync, "commit", _ended)
    event.listen(sync, "rollback", _ended)


def open_transactions() -> int:
    """How many transactions the calling task holds open now."""
    task = _task()
    held = _open.get(task) if task is not None else None
    if not held:
        return 0
    return sum(1 for conn in held if not conn.closed and conn.in_transaction())


def check_no_transaction(call: str, **context: object) -> None:
    """Called before a network call (`call` names it: "rpc eth_getLogs", "webhook delivery")."""
    if not open_transactions():
        return
    metrics.NETWORK_CALLS_IN_TRANSACTION.labels(call.split(" ", 1)[0]).inc()
    if _mode == "raise":
        raise TransactionHeldAcrossNetworkCall(
            f"{call} made while this task holds an open database transaction")
    log.error("network call made inside an open database transaction", call=call, **context)


async def _on_request_start(session: aiohttp.ClientSession, context: object,
                            params: aiohttp.TraceRequestStartParams) -> None:
    check_no_transaction(f"http {params.method}", host=params.url.host)


def http_trace() -> aiohttp.TraceConfig:
    """A trace config that checks every request of an aiohttp session (`trace_configs=[http_trace()]`)."""
    import aiohttp  # imported lazily: a process that only reads the database (a `vip` command) needs none

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(_on_request_start)
    return trace
