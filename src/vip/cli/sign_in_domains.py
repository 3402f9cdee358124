"""`vip sign-in-domains ...`: the sites an organisation's borrowers sign in on (the EIP-4361 domains a
wallet message may name): list, add (or replace a domain's URI prefixes), remove."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from vip.cli.dev_stack import database_url
from vip.cli.organisations import existing_organisation
from vip.config import Settings
from vip.connections import sign_in_domains
from vip.errors import ApiError
from vip.store.engine import create_engine


async def run_sign_in_domains_command(_: Settings, database_url: str, args: argparse.Namespace) -> int:
    """Exit 0 done, 1 refused (a malformed domain or prefix, an unknown domain), 2 no such organisation."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            org = await existing_organisation(conn, args.org, f"sign-in-domains {args.domains_command}")
            if org is None:
                return 2
            if args.domains_command == "list":
                for row in await sign_in_domains.rows_of(conn, org):
                    print(f"{row.domain}  {' '.join(row.uri_prefixes)}")
            elif args.domains_command == "add":
                row, created = await sign_in_domains.put_domain(conn, org, args.domain, args.uri_prefixes,
                                                                datetime.now(UTC))
                print(f"{'added' if created else 'updated'} {row.domain} for {args.org}: "
                      f"{' '.join(row.uri_prefixes)}")
            else:
                row = await sign_in_domains.remove_domain(conn, org, args.domain)
                print(f"removed {row.domain} from {args.org}")
    except ApiError as exc:
        details = f" {exc.details}" if exc.details else ""
        print(f"{exc.code}: {exc.message}{details}", file=sys.stderr)
        return 1
    finally:
        await engine.dispose()
    return 0


def cmd_sign_in_domains(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_sign_in_domains_command(settings, database_url(settings), args))
