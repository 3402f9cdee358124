"""Whether an exception means the database is out of reach (down, restarting, refusing connections, a
connection it dropped), rather than a fault of the request or the code: such a request is answered 503
ERR_NOT_READY with Retry-After, logged in one line, never with a traceback (api/middleware.py)."""

from __future__ import annotations

import psycopg
from sqlalchemy import exc as sa_exc

# SQLAlchemy wraps the driver's errors; a pool that cannot hand out a connection in time raises its own.
_OUTAGES: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError, sa_exc.TimeoutError,
    psycopg.OperationalError, psycopg.InterfaceError, ConnectionRefusedError, ConnectionResetError,
)


def database_unreachable(error: BaseException) -> bool:
    """`error`, or an error it was raised from, says the database cannot be reached or dropped us."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, _OUTAGES):
            return True
        current = current.__cause__ or current.__context__
    return False


def first_line(error: BaseException) -> str:
    """The error's type and the first line of its message (what a log line carries)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__
