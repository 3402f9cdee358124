"""`vip keys create|list|revoke --org NAME`: an organisation's API keys, straight in the database."""

from __future__ import annotations

import argparse
import asyncio
import sys

from vip.accounts import keys
from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.store.engine import create_engine


def cmd_keys(settings: Settings, args: argparse.Namespace) -> int:
    async def main() -> int:
        engine = create_engine(database_url(settings))
        try:
            async with engine.begin() as conn:
                if args.keys_command == "create":
                    org_id = await keys.ensure_organisation(conn, args.org)
                else:
                    found = await keys.organisation_named(conn, args.org)
                    if found is None:
                        print(f"vip keys {args.keys_command}: no organisation named {args.org!r} (its first "
                              f"key creates it: vip keys create --org {args.org})", file=sys.stderr)
                        return 2
                    org_id = found
                if args.keys_command == "create":
                    secret, info = await keys.create_key(conn, org_id, args.scopes.split(","),
                                                         args.description)
                    print(f"created {info.id} for {args.org} with scopes {','.join(info.scopes)}")
                    print(f"secret (shown once, store it now): {secret}")
                elif args.keys_command == "list":
                    for info in await keys.list_keys(conn, org_id):
                        status = "revoked" if info.revoked_at else "active"
                        used = f"{info.last_used_at:%Y-%m-%d %H:%M}" if info.last_used_at else "never"
                        print(f"{info.id}  {info.prefix}...  {','.join(info.scopes):<26} {status:<8} "
                              f"created {info.created_at:%Y-%m-%d %H:%M}  last used {used}")
                else:
                    if await keys.revoke_key(conn, org_id, args.key_id) is None:
                        print(f"no key {args.key_id} in {args.org}", file=sys.stderr)
                        return 1
                    print(f"revoked {args.key_id}")
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        finally:
            await engine.dispose()
        return 0

    return asyncio.run(main())
