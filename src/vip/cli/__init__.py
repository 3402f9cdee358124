"""The `vip` command: dev, index, serve, migrate, contracts, watch, status, orgs, keys, staff, webhooks,
listen, trigger, funding-wallets, sign-in-domains, secrets, time-travel."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

import structlog
from aiohttp import web
from alembic import command as alembic_command
from web3 import Web3

from vip.accounts import keys
from vip.api.app import create_app
from vip.chain import time_travel
from vip.chain.deployment import contract_problem
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.chain.rpc import RpcError
from vip.cli.contracts import add_contracts_parser, run_contracts_command
from vip.cli.dev_stack import DEFAULT_DATA_DIR, with_dev_stack
from vip.cli.errors import explain, shown_database
from vip.cli.funding_wallets import add_funding_wallets_parser, run_funding_wallets_command
from vip.cli.listen import add_listen_parser, run_listen
from vip.cli.organisations import add_orgs_parser, run_orgs_command
from vip.cli.secrets import add_secrets_parser, run_secrets_command
from vip.cli.sign_in_domains import add_sign_in_domains_parser, run_sign_in_domains_command
from vip.cli.staff import add_staff_parser, run_staff_command
from vip.cli.trigger import add_trigger_parser, run_trigger
from vip.cli.watch import add_watch_parser, run_watch_command
from vip.cli.webhooks import add_webhooks_parser, run_webhooks_command
from vip.config import Settings, load_settings
from vip.daemon import run_daemon
from vip.devstack.dev import run_dev
from vip.devstack.postgres import embedded_postgres_url, to_sqlalchemy_url
from vip.devstack.provider import PROFILES as PROVIDER_PROFILES
from vip.indexer import store
from vip.logging import configure_logging
from vip.metrics import package_version
from vip.production_secrets import production_secret_problems
from vip.store.engine import alembic_config, create_engine, migrate

log = structlog.get_logger("vip.cli")


def database_url(settings: Settings) -> str:
    """DATABASE_URL when set, else the embedded PostgreSQL in the default data directory."""
    if settings.database_url:
        return to_sqlalchemy_url(settings.database_url)
    return embedded_postgres_url(DEFAULT_DATA_DIR / "pg")


def _run_until_signal(main) -> None:
    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    migrate(database_url(settings))
    print("database schema is up to date")
    return 0


def cmd_revision(settings: Settings, args: argparse.Namespace) -> int:
    url = database_url(settings)
    migrate(url)  # autogenerate compares the models with an up-to-date schema
    alembic_command.revision(alembic_config(url), message=args.message, autogenerate=True)
    return 0


def no_networks_error(settings: Settings, command: str) -> str | None:
    """Why `command` (serve, index) should not start: no network has an RPC URL. None when one has."""
    if settings.enabled_networks():
        return None
    variables = ", ".join(sorted(n.rpc_url_env for n in settings.networks.values() if n.rpc_url_env))
    return (f"vip {command}: no network is enabled: set an RPC URL in VIP_RPC_<NETWORK> ({variables}) or "
            "a network's rpc_url in a config file listed in $VIP_CONFIG (or pass --allow-no-networks)")


def secrets_error(settings: Settings, command: str) -> str | None:
    """Why `command` must not start in production (no network marked local): a secret is missing or is
    a public development value. None when every secret is set, or in a development stack."""
    problems = production_secret_problems(settings, command)
    if not problems:
        return None
    return (f"vip {command}: refusing to start in production (no network is marked local): "
            + "; ".join(problems) + " (docs/security.md says how to make each)")


def refuses_to_start(settings: Settings, args: argparse.Namespace) -> bool:
    """A service started with no network follows no chain and can verify no wallet: say so and refuse,
    unless told to run anyway (a daemon that only delivers webhooks, in a test or a benchmark). Production
    refuses the public development secrets."""
    error = None if args.allow_no_networks else no_networks_error(settings, args.command)
    error = error or secrets_error(settings, args.command)
    if error:
        print(error, file=sys.stderr)
    return error is not None


def contracts_error(settings: Settings, command: str, networks: list[str] | None = None) -> str | None:
    """Why `command` must not start: a configured disbursement contract is not our contract, or its
    operator is not ours (the daemon's key, else `disbursement.operator_address`). None when every one is."""
    operator = settings.disbursement.operator_address
    if command == "index":
        with contextlib.suppress(OperatorKeyMissing):
            operator = load_operator(settings.disbursement).address
    for network in settings.enabled_networks():
        if not network.disbursement_contract or (networks and network.name not in networks):
            continue
        w3 = Web3(Web3.HTTPProvider(network.rpc_url, request_kwargs={"timeout": 30}))
        try:
            problem = contract_problem(w3, network.chain_id, network.disbursement_contract, operator)
        except Exception as exc:  # the node's refusal or silence, whatever the transport raises
            problem = f"its RPC could not be read ({type(exc).__name__}); the contract is unchecked"
        if problem:
            return (f"vip {command}: refusing to start: {network.name}'s disbursement contract: {problem}")
    return None


def cmd_index(settings: Settings, args: argparse.Namespace) -> int:
    if refuses_to_start(settings, args):
        return 2
    error = contracts_error(settings, "index", args.network)
    if error:
        print(error, file=sys.stderr)
        return 2
    url = database_url(settings)
    migrate(url)
    _run_until_signal(lambda stop: run_daemon(settings, url, stop, networks=args.network or None))
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    if refuses_to_start(settings, args):
        return 2
    error = contracts_error(settings, "serve")
    if error:
        print(error, file=sys.stderr)
        return 2
    if settings.operator_key_given:
        print("vip serve: ignoring the operator key in the environment: the API never signs, `vip index` "
              "executes charges", file=sys.stderr)
    settings = settings.without_operator()
    url = database_url(settings)
    migrate(url)
    host, port = args.host or settings.api.host, args.port or settings.api.port

    def announce(_: str) -> None:  # aiohttp calls it once every listener is bound
        base = f"http://{host}:{port}"
        metrics = (f"http://{settings.api.metrics_host}:{settings.api.metrics_port}/metrics"
                   if settings.api.metrics_port else f"{base}/metrics")
        log.info("api listening", url=base, reference=f"{base}/docs", readiness=f"{base}/readyz",
                 metrics=metrics, networks=[n.name for n in settings.enabled_networks()])

    # Access lines come from our middleware (with request ids and the organisation), not aiohttp's logger.
    web.run_app(create_app(settings, url), host=host, port=port, access_log=None, print=announce)
    return 0


def cmd_dev(settings: Settings, args: argparse.Namespace) -> int:
    return run_dev(Path(args.data_dir), Path(args.state_file) if args.state_file else None,
                   args.anvil_port, args.api_port, args.metrics_port, demo=not args.no_demo,
                   configured_database_url=settings.database_url, reset=args.reset, personas=args.persona,
                   provider=args.provider)


def cmd_contracts(settings: Settings, args: argparse.Namespace) -> int:
    return run_contracts_command(settings, database_url(settings), args)


def cmd_watch(settings: Settings, args: argparse.Namespace) -> int:
    return run_watch_command(settings, database_url(settings), args)


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


# --- webhooks (issue 6) ---
def cmd_webhooks(settings: Settings, args: argparse.Namespace) -> int:
    # In a `vip dev` checkout the stack's overlays apply (local development: http endpoint URLs).
    settings = with_dev_stack(settings)
    return asyncio.run(run_webhooks_command(settings, database_url(settings), args))


def cmd_orgs(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_orgs_command(database_url(settings), args))


def cmd_staff(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_staff_command(database_url(settings), args))


def cmd_funding_wallets(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_funding_wallets_command(settings, database_url(settings), args))


def cmd_sign_in_domains(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_sign_in_domains_command(settings, database_url(settings), args))


def cmd_secrets(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_secrets_command(settings, database_url(settings), args))


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


# --- dev: integrators' test clock ----------------------------------------------------------------------
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


def add_time_travel_parser(sub) -> None:
    travel = sub.add_parser("time-travel", help="move a local chain's time forward and mine blocks")
    travel.add_argument("--network", default="local", help="a network marked local = true")
    when = travel.add_mutually_exclusive_group()
    when.add_argument("--seconds", type=int, help="stamp the first new block this long after the head")
    when.add_argument("--to-timestamp", help="stamp the first new block at this time (ISO 8601 or Unix)")
    travel.add_argument("--blocks", type=int, default=1, help="blocks to mine")
    travel.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="a running `vip dev`'s data directory, whose local network is used")
    travel.set_defaults(func=cmd_time_travel)


def add_allow_no_networks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-no-networks", action="store_true",
                        help="start even when no network has an RPC URL (VIP_RPC_<NETWORK>)")


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless it has none (None, or a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class VipArgumentParser(argparse.ArgumentParser):
    """The parser of `vip` and, through add_subparsers (which builds parsers of the parent's class), of
    every subcommand: the defaults are shown everywhere without each command asking."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = VipArgumentParser(prog="vip", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="run the whole stack locally (Postgres, Anvil, contracts, indexer, API)")
    dev.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                     help="embedded PostgreSQL, chain state, logs and the dev API key live here")
    dev.add_argument("--state-file", help="write base URL, key and network details here once ready")
    dev.add_argument("--anvil-port", type=int, default=8545, help="the local chain's JSON-RPC port")
    dev.add_argument("--api-port", type=int, default=8080, help="the API's port")
    dev.add_argument("--metrics-port", type=int, default=9464, help="the indexer daemon's /metrics port")
    dev.add_argument("--persona", action="append", metavar="NAME",
                     help="also make this preset borrower (repeatable; docs/personas.md lists them)")
    dev.add_argument("--reset", action="store_true",
                     help="throw the data directory away first (database, chain, demo borrowers, dev key)")
    dev.add_argument("--no-demo", action="store_true",
                     help="skip seeding the demo borrowers (the pytest plugin's stacks start without them)")
    dev.add_argument("--provider", choices=sorted(PROVIDER_PROFILES),
                     help="reach Anvil through a hosted provider's stand-in with its documented limits")
    dev.set_defaults(func=cmd_dev)

    index = sub.add_parser("index", help="run the indexer daemon")
    index.add_argument("--network", action="append", help="only this network (repeatable)")
    add_allow_no_networks(index)
    index.set_defaults(func=cmd_index)

    serve = sub.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", help="listen address (default: api.host of the configuration, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: api.port of the configuration, 8080)")
    add_allow_no_networks(serve)
    serve.set_defaults(func=cmd_serve)

    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=cmd_migrate)
    add_contracts_parser(sub).set_defaults(func=cmd_contracts)
    revision = sub.add_parser("revision", help="write a migration from changes in vip/store/tables.py")
    revision.add_argument("-m", "--message", required=True, help="the migration's one-line summary")
    revision.set_defaults(func=cmd_revision)
    sub.add_parser("status", help="show indexer cursors, watch sets and reorgs").set_defaults(func=cmd_status)

    keys_parser = sub.add_parser("keys", help="create, list and revoke API keys of an organisation")
    keys_sub = keys_parser.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key (the organisation is created if new)")
    create.add_argument("--org", required=True, help="the organisation's name")
    create.add_argument("--scopes", default="read,write", help="comma-separated: read,write,disburse,admin")
    create.add_argument("--description", help="what the key is for (shown in listings)")
    listing = keys_sub.add_parser("list", help="list an organisation's keys (prefix, scopes, dates)")
    listing.add_argument("--org", required=True, help="the organisation's name")
    revoke = keys_sub.add_parser("revoke", help="revoke a key (at once, in every API process)")
    revoke.add_argument("key_id", help="the key's id (key_...), as `vip keys list` shows it")
    revoke.add_argument("--org", required=True, help="the organisation's name")
    keys_parser.set_defaults(func=cmd_keys)

    add_orgs_parser(sub).set_defaults(func=cmd_orgs)
    add_staff_parser(sub).set_defaults(func=cmd_staff)
    add_webhooks_parser(sub).set_defaults(func=cmd_webhooks)
    add_funding_wallets_parser(sub).set_defaults(func=cmd_funding_wallets)
    add_sign_in_domains_parser(sub).set_defaults(func=cmd_sign_in_domains)
    add_listen_parser(sub).set_defaults(func=run_listen)
    add_trigger_parser(sub).set_defaults(func=run_trigger)
    add_secrets_parser(sub).set_defaults(func=cmd_secrets)

    add_watch_parser(sub).set_defaults(func=cmd_watch)
    add_time_travel_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings: Settings | None = None
    try:
        settings = load_settings()
        configure_logging(settings.log_format)
        return args.func(settings, args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        message = explain(exc, shown_database(settings.database_url) if settings else "the database")
        if message is None:
            raise
        print(f"vip {args.command}: {message}", file=sys.stderr)
        return 2

