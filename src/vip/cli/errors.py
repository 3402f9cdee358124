"""The common mistakes of starting the service, each said in one line with its fix instead of a traceback.
Anything not recognised here is a bug and keeps its traceback."""

from __future__ import annotations

import errno

import psycopg
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from vip.config import ConfigError
from vip.devstack.errors import AnvilNotFound, PortBusy


def shown_database(database_url: str | None) -> str:
    """The database in words, its URL without the password (a terminal or a log never shows a secret)."""
    if not database_url:
        return "the embedded PostgreSQL"
    try:
        return make_url(database_url).render_as_string(hide_password=True)
    except ArgumentError:
        return "DATABASE_URL (not a URL)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def explain(exc: BaseException, database: str = "the database") -> str | None:
    """One line saying what went wrong and how to fix it, or None for an error that is not a known mistake."""
    if isinstance(exc, ConfigError):
        return str(exc)
    if isinstance(exc, AnvilNotFound | PortBusy):
        return str(exc)
    database_error = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(database_error, psycopg.OperationalError):
        return (f"cannot use {database}: {_first_line(database_error)}. Is PostgreSQL running "
                "there and is the URL right? Fix DATABASE_URL, or unset it to use the embedded PostgreSQL")
    if isinstance(exc, ArgumentError) and "URL" in str(exc):
        return f"DATABASE_URL is not a database URL ({_first_line(exc)}); expected postgresql://user@host:port/db"
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return (f"{_first_line(exc)}: another process listens there. Stop it, or choose another port "
                "(--port, or api.port / api.metrics_port / daemon.metrics_port in a config file)")
    return None
