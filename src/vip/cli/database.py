"""`vip migrate`, `vip revision` and `vip status`: the database's schema and the indexer's state in it."""

from __future__ import annotations

import argparse
import asyncio

from alembic import command as alembic_command

from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.indexer import store
from vip.store.engine import alembic_config, create_engine, migrate


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    migrate(database_url(settings))
    print("database schema is up to date")
    return 0


def cmd_revision(settings: Settings, args: argparse.Namespace) -> int:
    url = database_url(settings)
    migrate(url)  # autogenerate compares the models with an up-to-date schema
    alembic_command.revision(alembic_config(url), message=args.message, autogenerate=True)
    return 0


def cmd_status(settings: Settings, _: argparse.Namespace) -> int:
    async def main() -> None:
        engine = create_engine(database_url(settings))
        async with engine.connect() as conn:
            networks = await store.network_status(conn)
        await engine.dispose()
        for n in networks:
            print(f"{n.network:10} chain {n.chain_id:>8}  block {n.block_number:>10}  "
                  f"watched {n.watched:>6}  reorgs {n.reorgs:>4}  leader {n.leader or '-'}")

    asyncio.run(main())
    return 0
