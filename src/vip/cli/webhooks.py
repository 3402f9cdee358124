"""`vip webhooks ...`: the operator's side of the admin webhook and event endpoints."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime, timedelta

from vip.accounts import keys
from vip.cli.dev_stack import database_url, with_dev_stack
from vip.cli.organisations import existing_organisation
from vip.config import Settings
from vip.store.engine import create_engine
from vip.webhooks import events, store
from vip.webhooks.catalogue import ALL, normalise_event_types
from vip.webhooks.urls import check_endpoint_host, check_endpoint_url


def _types(endpoint: store.Endpoint) -> str:
    return ",".join(endpoint.event_types) if endpoint.event_types is not None else ALL


async def run_webhooks_command(settings: Settings, database_url: str, args: argparse.Namespace) -> int:
    now = datetime.now(UTC)  # webhook timing is wall-clock time (docs/webhooks.md)
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            command = args.webhooks_command
            # Registering an endpoint may start an organisation (as its first key does); every other
            # command acts on an existing one, and a mistyped name is an error.
            found = (await keys.ensure_organisation(conn, args.org) if command == "create"
                     else await existing_organisation(conn, args.org, f"webhooks {command}"))
            if found is None:
                return 2
            org = found
            if command == "create":
                url = check_endpoint_url(args.url, allow_http=settings.webhooks.allow_http)
                await check_endpoint_host(url, allow_http=settings.webhooks.allow_http)
                types = normalise_event_types([t.strip() for t in args.event_types.split(",") if t.strip()])
                secret, endpoint = await store.create_endpoint(conn, org, url, types, args.description, now,
                                                               cipher=settings.api.cipher())
                print(f"created {endpoint.id} for {args.org}: {endpoint.url} ({_types(endpoint)})")
                print(f"signing secret (shown once, store it now): {secret}")
            elif command == "list":
                for e in await store.list_endpoints(conn, org):
                    disabled = f"  disabled: {e.disabled_reason}" if e.disabled_at else ""
                    print(f"{e.id}  {e.url}  {_types(e)}  created {e.created_at:%Y-%m-%d %H:%M}{disabled}")
            elif command == "enable":
                if await store.enable_endpoint(conn, org, args.endpoint_id) is None:
                    return _missing(f"no endpoint {args.endpoint_id} in {args.org}")
                print(f"enabled {args.endpoint_id}")
            elif command == "delete":
                if await store.delete_endpoint(conn, org, args.endpoint_id, now) is None:
                    return _missing(f"no endpoint {args.endpoint_id} in {args.org}")
                print(f"deleted {args.endpoint_id}")
            elif command == "rotate-secret":
                overlap = timedelta(seconds=settings.webhooks.rotation_overlap_s)
                rotated = await store.rotate_secret(conn, org, args.endpoint_id, now, overlap,
                                                    cipher=settings.api.cipher())
                if rotated is None:
                    return _missing(f"no endpoint {args.endpoint_id} in {args.org}")
                secret, endpoint = rotated
                print(f"rotated {endpoint.id}; the previous secret signs until "
                      f"{endpoint.previous_secret_expires_at:%Y-%m-%d %H:%M:%S} UTC")
                print(f"signing secret (shown once, store it now): {secret}")
            elif command == "events":
                filters = events.EventFilters(type=args.type, delivery_status=args.status)
                rows, _ = await events.list_events(conn, org, filters, None, args.limit)
                for r in rows:
                    print(f"{r.id}  {r.type:<34} {r.created_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}  "
                          f"{r.delivery_status}")
            else:
                if args.endpoint is not None:
                    endpoint = await store.get_endpoint(conn, org, args.endpoint)
                    if endpoint is None:
                        return _missing(f"no endpoint {args.endpoint} in {args.org}")
                    if endpoint.disabled_at is not None:
                        return _missing(f"endpoint {args.endpoint} is disabled: `vip webhooks enable` first")
                queued = await events.replay(conn, org, args.event_id, now, args.endpoint)
                if queued is None:
                    return _missing(f"no event {args.event_id} in {args.org}")
                if args.endpoint is not None and not queued:
                    return _missing(f"endpoint {args.endpoint} does not receive this event's type")
                print(f"replaying {args.event_id} to {queued} endpoint(s)")
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    finally:
        await engine.dispose()
    return 0


def _missing(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


def cmd_webhooks(settings: Settings, args: argparse.Namespace) -> int:
    # In a `vip dev` checkout the stack's overlays apply (local development: http endpoint URLs).
    settings = with_dev_stack(settings)
    return asyncio.run(run_webhooks_command(settings, database_url(settings), args))
