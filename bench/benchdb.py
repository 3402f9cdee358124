"""A throw-away, migrated database for a benchmark run: on the server named by a URL (created and
dropped there), or on an embedded pgserver in a temporary directory (stopped and deleted)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from vip.devstack.postgres import embedded_postgres_url, to_sqlalchemy_url
from vip.store.engine import migrate


@dataclass(frozen=True)
class BenchDatabase:
    url: str  # SQLAlchemy (postgresql+psycopg)
    pg_url: str  # plain libpq, for psycopg
    source: str  # what the figures ran on
    tmp: Path  # scratch directory of this run
    settings: dict[str, str]  # server settings worth printing beside the figures
    server_url: str = ""  # the server's admin URL (SQLAlchemy form), for `clone`

    @contextmanager
    def clone(self, suffix: str) -> Iterator[str]:
        """A new database copied from this migrated one (`CREATE DATABASE ... TEMPLATE`), dropped after:
        a run that needs an empty, migrated database again does not pay the migrations. Yields its
        SQLAlchemy URL. The template must have no open connections."""
        name = f"{make_url(self.url).database}_{suffix}"
        pg_admin(self.server_url, f"CREATE DATABASE {name} TEMPLATE {make_url(self.url).database}")
        try:
            yield make_url(self.url).set(database=name).render_as_string(hide_password=False)
        finally:
            pg_admin(self.server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pg_admin(server_url: str, sql: str) -> None:
    url = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


@contextmanager
def throwaway_database(database_url: str | None, name: str, show: tuple[str, ...]) -> Iterator[BenchDatabase]:
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    # Registered before pgserver's own exit hook (which rewrites its runtime files there), so it runs after.
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    database = f"{name.replace('-', '_')}_{os.getpid()}"
    server_url = to_sqlalchemy_url(database_url) if database_url else None
    source = "DATABASE_URL / --database-url" if server_url else "embedded pgserver (temp dir)"
    try:
        server_url = server_url or embedded_postgres_url(tmp / "pg")
        pg_admin(server_url, f"CREATE DATABASE {database}")
        url = make_url(server_url).set(database=database).render_as_string(hide_password=False)
        pg_url = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        migrate(url)
        with psycopg.connect(pg_url) as conn:
            settings = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in show}
        yield BenchDatabase(url, pg_url, source, tmp, settings, server_url)
    finally:
        if server_url and database_url:
            pg_admin(server_url, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        if not database_url and (tmp / "pg").exists():
            import pgserver

            pgserver.get_server(tmp / "pg").cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def kept_database(database_url: str, name: str, show: tuple[str, ...]
                  ) -> Iterator[tuple[BenchDatabase, bool]]:
    """A database `name` on the server at `database_url` that outlives the run: created when absent (yields
    fresh=True), reused with its data when present (fresh=False); migrated to the head either way, so a kept
    database measures today's schema. For a bench whose seeding costs minutes, to measure again on the same
    data; drop it with `DROP DATABASE name`."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    server_url = to_sqlalchemy_url(database_url)
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    pg_url = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    admin = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        fresh = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None
    try:
        if fresh:
            pg_admin(server_url, f"CREATE DATABASE {name}")
        migrate(url)
        with psycopg.connect(pg_url) as conn:
            settings = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in show}
        yield BenchDatabase(url, pg_url, f"kept database {name} on --database-url", tmp, settings,
                            server_url), fresh
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
