"""`vip watch NETWORK [ADDRESS ...] [--file PATH|-]`: add addresses to a network's watch set, any number
at once (COPY into a temporary table, one transaction); their histories are backfilled by the daemon."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.formats import address_in
from vip.indexer import store
from vip.store.engine import create_engine


class WatchInputError(ValueError):
    """`vip watch` was given something that is not an address (nothing is written)."""


def read_watch_addresses(args: argparse.Namespace) -> list[str]:
    """The addresses `vip watch` was given, lower-case: on the command line, and one a line from `--file`
    (`-`: standard input; blank lines and `#` comments skipped). Any that is not an address stops the
    command before anything is written, naming where it is."""
    sources: list[tuple[str, str]] = [(f"argument {i + 1}", a) for i, a in enumerate(args.address)]
    if args.file is not None:
        stream = sys.stdin if args.file == "-" else Path(args.file).open(encoding="utf-8")  # noqa: SIM115
        with stream:
            for number, line in enumerate(stream, 1):
                text = line.split("#", 1)[0].strip()
                if text:
                    sources.append((f"{args.file} line {number}", text))
    addresses = []
    for where, text in sources:
        try:
            addresses.append(address_in(text).lower())
        except ValueError as exc:
            raise WatchInputError(f"{where}: {text[:60]!r} {exc}") from None
    if not addresses:
        raise WatchInputError("no address given: name one, or pass --file PATH (- for standard input)")
    return addresses


def run_watch_command(settings: Settings, database_url: str, args: argparse.Namespace) -> int:
    if args.network not in settings.networks:
        names = ", ".join(sorted(settings.networks))
        print(f"vip watch: unknown network {args.network!r}: one of {names}", file=sys.stderr)
        return 2
    start_time = datetime.fromisoformat(args.start_time) if args.start_time else None
    if start_time is not None and start_time.tzinfo is None:
        start_time = start_time.replace(tzinfo=UTC)
    try:
        addresses = read_watch_addresses(args)
    except (WatchInputError, OSError) as exc:
        print(f"vip watch: {exc}", file=sys.stderr)
        return 2

    async def main() -> int:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as conn:
                return await store.add_watched_addresses(conn, args.network, addresses, args.reason,
                                                         start_block=args.start_block, start_time=start_time)
        finally:
            await engine.dispose()

    added = asyncio.run(main())
    unique = len(set(addresses))
    if unique == 1 and args.file is None:
        print("watching" if added else "already watched", args.address[0], "on", args.network)
    else:
        print(f"watching {added:,} new addresses on {args.network} ({unique - added:,} already watched)")
    return 0


def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    return run_watch_command(settings, database_url(settings), args)
