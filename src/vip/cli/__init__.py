"""The `vip` command: dev, index, serve, migrate, contracts, watch, status, orgs, keys, staff, webhooks,
listen, trigger, funding-wallets, sign-in-domains, secrets, time-travel.

Its arguments are in vip.cli.parser; each subcommand's body is in the module named by its `Command`
(vip.cli.service: dev, index, serve; vip.cli.database: migrate, revision, status), imported only when
it runs."""

from __future__ import annotations

import sys

from vip.cli.errors import explain, shown_database
from vip.cli.parser import build_parser
from vip.config import Settings, load_settings
from vip.logging import configure_logging

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings: Settings | None = None
    try:
        settings = load_settings()
        configure_logging(settings.log_format)
        status: int = args.func(settings, args)
        return status
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        message = explain(exc, shown_database(settings.database_url) if settings else "the database")
        if message is None:
            raise
        print(f"vip {args.command}: {message}", file=sys.stderr)
        return 2
