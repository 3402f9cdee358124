"""The migrations build exactly the schema `vip/store/tables.py` describes: a change to one without the
other (a column added to a table but not to a migration, a migration that drifted) fails here."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool

from vip.store.tables import metadata


def test_migrated_database_matches_the_tables(database_url: str):
    engine = create_engine(database_url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            differences = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert differences == [], "tables.py and the migrations differ:\n" + "\n".join(map(str, differences))
