"""`vip secrets reseal`: seal every stored secret (webhook signing secrets, platform tokens) again under
the first key of VIP_TOKEN_KEY, the step between adding a new key to the ring and dropping the old one."""

from __future__ import annotations

import argparse
import asyncio
import sys

from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.connections import platform_tokens
from vip.store.engine import create_engine
from vip.webhooks import store as webhook_store


async def run_secrets_command(settings: Settings, database_url: str, _: argparse.Namespace) -> int:
    """Re-seal in one transaction; exit 1 (nothing changed) when some value opens with no key of the
    ring, naming where, so no secret is left under a key about to be dropped unnoticed."""
    cipher = settings.api.cipher()
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            hooks = await webhook_store.reseal_secrets(conn, cipher)
            tokens = await platform_tokens.reseal(conn, cipher)
            unreadable = hooks.unreadable + tokens.unreadable
            if unreadable:
                await conn.rollback()
                print(f"nothing re-sealed: {len(unreadable)} stored value(s) open with no key of "
                      f"VIP_TOKEN_KEY (add the key they were sealed with): {', '.join(unreadable)}",
                      file=sys.stderr)
                return 1
    finally:
        await engine.dispose()
    print(f"re-sealed under key {cipher.current_id!r}: {hooks.resealed} webhook secret(s) and "
          f"{tokens.resealed} platform token(s); {hooks.current + tokens.current} already were")
    return 0


def cmd_secrets(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_secrets_command(settings, database_url(settings), args))
