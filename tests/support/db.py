"""Test databases: one migrated template per session, a fresh copy of it per test (CREATE ... TEMPLATE)."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from vip.devstack.postgres import embedded_postgres_url, to_sqlalchemy_url
from vip.store.engine import migrate

TEMPLATE = f"vip_template_{os.getpid()}"


class TestDatabases:
    """Creates databases on one server: embedded (pgserver) by default, `DATABASE_URL`'s when set."""

    def __init__(self, tmp_dir: Path) -> None:
        env_url = os.environ.get("DATABASE_URL")
        # An embedded cluster lives in the session's temporary directory and goes with it: its databases
        # need no dropping (minutes for a worker's few hundred). A shared server's do.
        self.embedded = not env_url
        self.server_url = to_sqlalchemy_url(env_url) if env_url else embedded_postgres_url(tmp_dir / "pg")
        self._names = itertools.count()
        self._created: list[str] = []
        self._admin("DROP DATABASE IF EXISTS " + TEMPLATE)
        self._admin("CREATE DATABASE " + TEMPLATE)
        migrate(self.url_for(TEMPLATE))

    def url_for(self, database: str) -> str:
        return make_url(self.server_url).set(database=database).render_as_string(hide_password=False)

    def _admin(self, sql: str) -> None:
        url = make_url(self.server_url).set(drivername="postgresql")
        with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
            conn.execute(sql)

    def create(self) -> str:
        """A new migrated database; returns its SQLAlchemy URL."""
        name = f"vip_test_{os.getpid()}_{next(self._names)}_{uuid.uuid4().hex[:6]}"
        self._admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        self._created.append(name)
        return self.url_for(name)

    def drop_all(self) -> None:
        if self.embedded:
            return
        for name in [*self._created, TEMPLATE]:
            self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
