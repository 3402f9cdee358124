"""`vip orgs ...` (create, list), and how the commands that act on an organisation find it: by its exact
name, never creating it (a mistyped --org is an error, not a new organisation)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts import keys
from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.store.engine import create_engine
from vip.store.tables import organisations


async def existing_organisation(conn: AsyncConnection, name: str, command: str) -> str | None:
    """The id of the organisation called `name`; None, with a line on stderr saying how to create it,
    when there is none."""
    found = await keys.organisation_named(conn, name)
    if found is None:
        print(f"vip {command}: no organisation named {name!r} (`vip orgs list` shows them; "
              f"`vip orgs create {name}` creates it)", file=sys.stderr)
    return found


async def run_orgs_command(database_url: str, args: argparse.Namespace) -> int:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            if args.orgs_command == "create":
                name = args.name.strip()
                if not name:
                    print("vip orgs create: the name may not be blank", file=sys.stderr)
                    return 2
                if await keys.organisation_named(conn, name) is not None:
                    print(f"vip orgs create: {name!r} exists already", file=sys.stderr)
                    return 1
                print(f"created {await keys.ensure_organisation(conn, name)} {name}")
            else:
                for row in await conn.execute(select(organisations).order_by(organisations.c.name)):
                    print(f"{row.id}  {row.name}  created {row.created_at:%Y-%m-%d %H:%M}")
    finally:
        await engine.dispose()
    return 0


def cmd_orgs(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_orgs_command(database_url(settings), args))
