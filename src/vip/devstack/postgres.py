"""The database the service runs on: `DATABASE_URL` when set, else an embedded PostgreSQL (pgserver)."""

from __future__ import annotations

import os
from pathlib import Path

from vip.config import ConfigError


def embedded_postgres_url(data_dir: Path) -> str:
    """Start (or reuse) a private PostgreSQL cluster in `data_dir`; return a SQLAlchemy URL for it."""
    # NOTE: pgserver derives a runtime dir from XDG_RUNTIME_DIR and warns when it is unset.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir.parent))
    try:
        import pgserver  # imported lazily: only the embedded path needs its binaries
    except ImportError as exc:  # the container image leaves it out
        raise ConfigError("DATABASE_URL is not set and the embedded PostgreSQL (pgserver) is not "
                          "installed: set DATABASE_URL") from exc

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data_dir), cleanup_mode="stop")
    uri = server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
    return to_sqlalchemy_url(uri)


def to_sqlalchemy_url(url: str) -> str:
    """Make any postgres URL use the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise ConfigError("DATABASE_URL must be a postgresql:// URL (postgresql://user:password@host:5432/db)")
