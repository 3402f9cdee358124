"""Alembic environment: runs migrations on a synchronous psycopg connection."""

from alembic import context
from sqlalchemy import create_engine, pool

from vip.store.tables import metadata

config = context.config


def run_migrations_online() -> None:
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata, compare_type=True)
        with context.begin_transaction():
            # Several processes may start at once (API and daemon): serialise their migrations.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727274)")
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run against a database")
run_migrations_online()
