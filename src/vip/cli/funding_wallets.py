"""`vip funding-wallets ...`: the operator's side of an organisation's funding wallets: list them, set
the default one (what a payment intent naming none uses), remove one. Registering needs the wallet's
signature and is done through the API (POST /v1/funding-wallets)."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from eth_utils import to_checksum_address

from vip.cli.dev_stack import database_url
from vip.cli.organisations import existing_organisation
from vip.config import Settings
from vip.errors import ApiError
from vip.payments import funding
from vip.store.engine import create_engine

ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


async def run_funding_wallets_command(_: Settings, database_url: str, args: argparse.Namespace) -> int:
    """Exit 0 done, 1 refused (not registered to the organisation, or in use), 2 a malformed address or
    no such organisation."""
    if args.funding_command != "list" and not ADDRESS.fullmatch(args.address):
        print(f"not an address: {args.address}", file=sys.stderr)
        return 2
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            found = await existing_organisation(conn, args.org, f"funding-wallets {args.funding_command}")
            if found is None:
                return 2
            org = found
            if args.funding_command == "list":
                default = await funding.default_of(conn, org)
                for row in await funding.wallets_of(conn, org):
                    mark = "*" if row.address == default else " "
                    print(f"{mark} {to_checksum_address(row.address)}  {row.kind:<8} {row.network:<10} "
                          f"registered {row.registered_at:%Y-%m-%d %H:%M}")
            elif args.funding_command == "default":
                row = await funding.set_default(conn, org, args.address)
                print(f"default funding wallet of {args.org}: {to_checksum_address(row.address)}")
            else:
                row = await funding.remove(conn, org, args.address)
                print(f"removed {to_checksum_address(row.address)} from {args.org}")
    except ApiError as exc:
        details = f" {exc.details}" if exc.details else ""
        print(f"{exc.code}: {exc.message}{details}", file=sys.stderr)
        return 1
    finally:
        await engine.dispose()
    return 0


def cmd_funding_wallets(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_funding_wallets_command(settings, database_url(settings), args))
