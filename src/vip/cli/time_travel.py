"""`vip time-travel`: move a local chain's time forward and mine blocks (the integrators' test clock)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from vip.chain import time_travel
from vip.chain.rpc import RpcError
from vip.config import Settings, load_settings


def _unix_time(text: str) -> int:
    """Unix seconds, or an ISO 8601 time (UTC when it names no zone)."""
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp())


def cmd_time_travel(settings: Settings, args: argparse.Namespace) -> int:
    dev_networks = Path(args.data_dir) / "networks.local.toml"  # written by a running `vip dev`
    if args.network not in settings.networks and dev_networks.exists():
        settings = load_settings(extra_files=[dev_networks])
    try:
        network = time_travel.local_network(settings, args.network)
        moved = asyncio.run(time_travel.travel(
            network, settings.rpc, seconds=args.seconds, blocks=args.blocks,
            to_timestamp=_unix_time(args.to_timestamp) if args.to_timestamp else None))
    except (time_travel.TimeTravelRefused, time_travel.NotForward, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except RpcError as exc:
        print(f"the RPC of {args.network} failed: {exc}", file=sys.stderr)
        return 1
    before, after = moved.before, moved.after
    print(f"{moved.network}: block {before.number} -> {after.number}, "
          f"{before.time:%Y-%m-%dT%H:%M:%SZ} -> {after.time:%Y-%m-%dT%H:%M:%SZ} "
          f"(+{after.timestamp - before.timestamp} s)")
    return 0
