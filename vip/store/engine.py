"""Database engine creation and Alembic migrations."""

from __future__ import annotations

from pathlib import Path

import simplejson
from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _json_dumps(value: object) -> str:
    # JSONB columns carry money and client metadata: Decimals stay exact numbers, never floats.
    return simplejson.dumps(value, use_decimal=True)


def _json_loads(text: str) -> object:
    return simplejson.loads(text, use_decimal=True)


def create_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
                               json_serializer=_json_dumps, json_deserializer=_json_loads)


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # NOTE: ConfigParser interpolation treats % specially; a password may contain one.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` (idempotent; safe to run from several processes in turn)."""
    command.upgrade(alembic_config(url), revision)
