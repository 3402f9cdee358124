"""Database engine creation and Alembic migrations.

Alembic is imported when a migration runs, not with this module: every `vip` command that reads or writes
the database imports this module, and only the daemons, `vip migrate` and the tests' templates migrate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import simplejson
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from vip.resources import migrations_dir
from vip.store import transaction_guard

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = migrations_dir()


def _json_dumps(value: object) -> str:
    # JSONB columns carry money and client metadata: Decimals stay exact numbers, never floats.
    return simplejson.dumps(value, use_decimal=True)


def _json_loads(text: str) -> object:
    return simplejson.loads(text, use_decimal=True)


def create_engine(url: str, pool_size: int = 10, pre_ping: bool = True) -> AsyncEngine:
    engine = create_async_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=pre_ping,
                                 json_serializer=_json_dumps, json_deserializer=_json_loads)
    event.listen(engine.sync_engine, "connect", _jit_off, insert=True)
    transaction_guard.watch(engine)
    return engine


def _jit_off(dbapi_connection: Any, _record: Any) -> None:
    """JIT compilation off for the session: the service's statements are short index reads, and one whose
    estimated cost passed jit_above_cost paid 25-300 ms of compiling for a 4 ms read (decision 357). A SET
    on each new connection (SQLAlchemy's documented pattern), not a startup option, which connection poolers
    refuse."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    cursor = dbapi_connection.cursor()
    cursor.execute("SET jit = off")
    cursor.close()
    dbapi_connection.autocommit = autocommit


@asynccontextmanager
async def autocommit_connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A pooled connection on which each statement commits on its own. For single-statement reads and
    counters: psycopg would otherwise spend a round trip on BEGIN before the statement and one on ROLLBACK
    when the connection goes back to the pool."""
    async with engine.connect() as conn:
        yield await conn.execution_options(isolation_level="AUTOCOMMIT")


def alembic_config(url: str) -> Config:
    from alembic.config import Config  # imported lazily: see the module's docstring

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # NOTE: ConfigParser interpolation treats % specially; a password may contain one.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` (idempotent; safe to run from several processes in turn)."""
    from alembic import command  # imported lazily: see the module's docstring

    command.upgrade(alembic_config(url), revision)
