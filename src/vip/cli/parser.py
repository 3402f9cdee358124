"""The `vip` command's arguments and help: every subcommand's parser, and which function runs it.

This module is what every `vip ...` imports before it knows which subcommand runs, so it imports little
(argparse, the configuration, the webhook catalogue): a subcommand's body (its module, and what that brings:
the API application, web3, Alembic, SQLAlchemy) is imported only when that subcommand runs (`Command`).
`tests/test_cli_startup.py` holds both: what parsing imports, and that every command resolves."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

from vip.cli.api_access import add_api_arguments
from vip.cli.dev_stack import DEFAULT_DATA_DIR
from vip.config import Settings
from vip.metrics import package_version
from vip.webhooks.catalogue import ALL, EVENT_TYPES

DESCRIPTION = """The `vip` command: dev, index, serve, migrate, contracts, watch, status, orgs, keys, staff,
webhooks, listen, trigger, funding-wallets, sign-in-domains, secrets, time-travel."""

OVERLAY_NAME = "contracts.toml"  # the overlay `vip contracts deploy` writes in $VIP_CONFIG
# Values of modules this one must not import (they bring web3 or SQLAlchemy), written out here;
# tests/test_cli_startup.py checks each is its module's own: vip.chain.deployment.DEFAULT_SALT,
# vip.dashboard.staff.ROLES, vip.webhooks.events.DELIVERY_STATUSES, vip.devstack.provider.PROFILES.
DEFAULT_SALT = "vip.Disbursement"
ROLES = ("admin", "analyst", "operator")
DELIVERY_STATUSES = ("pending", "delivered", "failed", "none")
PROVIDERS = ("alchemy", "blockpi", "infura", "node", "quicknode")


@dataclass(frozen=True)
class Command:
    """A subcommand's body, `function(settings, args) -> exit status` of `vip.cli.<module>`, imported when
    the subcommand runs: `vip webhooks list` never loads the API application or web3, `vip --help` nothing."""

    module: str
    function: str

    def resolve(self) -> Callable[[Settings, argparse.Namespace], int]:
        found: Callable[[Settings, argparse.Namespace], int] = getattr(
            importlib.import_module(f"vip.cli.{self.module}"), self.function)
        return found

    def __call__(self, settings: Settings, args: argparse.Namespace) -> int:
        return self.resolve()(settings, args)


def add_time_travel_parser(sub) -> None:
    travel = sub.add_parser("time-travel", help="move a local chain's time forward and mine blocks")
    travel.add_argument("--network", default="local", help="a network marked local = true")
    when = travel.add_mutually_exclusive_group()
    when.add_argument("--seconds", type=int, help="stamp the first new block this long after the head")
    when.add_argument("--to-timestamp", help="stamp the first new block at this time (ISO 8601 or Unix)")
    travel.add_argument("--blocks", type=int, default=1, help="blocks to mine")
    travel.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="a running `vip dev`'s data directory, whose local network is used")
    travel.set_defaults(func=Command("time_travel", "cmd_time_travel"))


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
    parser = VipArgumentParser(prog="vip", description=DESCRIPTION)
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
    dev.add_argument("--provider", choices=PROVIDERS,
                     help="reach Anvil through a hosted provider's stand-in with its documented limits")
    dev.set_defaults(func=Command("service", "cmd_dev"))

    index = sub.add_parser("index", help="run the indexer daemon")
    index.add_argument("--network", action="append", help="only this network (repeatable)")
    add_allow_no_networks(index)
    index.set_defaults(func=Command("service", "cmd_index"))

    serve = sub.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", help="listen address (default: api.host of the configuration, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: api.port of the configuration, 8080)")
    add_allow_no_networks(serve)
    serve.set_defaults(func=Command("service", "cmd_serve"))

    sub.add_parser("migrate", help="apply database migrations").set_defaults(
        func=Command("database", "cmd_migrate"))
    add_contracts_parser(sub).set_defaults(func=Command("contracts", "cmd_contracts"))
    revision = sub.add_parser("revision", help="write a migration from changes in vip/store/tables.py")
    revision.add_argument("-m", "--message", required=True, help="the migration's one-line summary")
    revision.set_defaults(func=Command("database", "cmd_revision"))
    sub.add_parser("status", help="show indexer cursors, watch sets and reorgs").set_defaults(
        func=Command("database", "cmd_status"))

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
    keys_parser.set_defaults(func=Command("keys", "cmd_keys"))

    add_orgs_parser(sub).set_defaults(func=Command("organisations", "cmd_orgs"))
    add_staff_parser(sub).set_defaults(func=Command("staff", "cmd_staff"))
    add_webhooks_parser(sub).set_defaults(func=Command("webhooks", "cmd_webhooks"))
    add_funding_wallets_parser(sub).set_defaults(func=Command("funding_wallets", "cmd_funding_wallets"))
    add_sign_in_domains_parser(sub).set_defaults(func=Command("sign_in_domains", "cmd_sign_in_domains"))
    add_listen_parser(sub).set_defaults(func=Command("listen", "run_listen"))
    add_trigger_parser(sub).set_defaults(func=Command("trigger", "run_trigger"))
    add_secrets_parser(sub).set_defaults(func=Command("secrets", "cmd_secrets"))

    add_watch_parser(sub).set_defaults(func=Command("watch", "cmd_watch"))
    add_time_travel_parser(sub)
    return parser


def add_contracts_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("contracts", help="deploy, verify and rotate the disbursement contract")
    commands = parser.add_subparsers(dest="contracts_command", required=True)
    deploy = commands.add_parser("deploy", help="deploy the disbursement contract on a network and write "
                                                "its address to the overlay")
    verify = commands.add_parser("verify", help="check that the configured address holds our contract with "
                                                "our operator")
    rotate = commands.add_parser("set-operator", help="make another address the contract's operator (the "
                                                      "owner's key signs)")
    rotate.add_argument("operator", help="the new operator's address")
    for command in (deploy, verify, rotate):
        command.add_argument("--network", required=True, help="a configured network with its RPC URL set")
    for command in (deploy, rotate):
        command.add_argument("--overlay", help=f"the TOML overlay to write (default: the file named "
                                               f"{OVERLAY_NAME} in $VIP_CONFIG)")
    deploy.add_argument("--operator", help="the operator's address (default: the operator key's)")
    deploy.add_argument("--owner", help="the owner's address, who may change the operator (default: the "
                                        "deployer's)")
    deploy.add_argument("--salt", default=DEFAULT_SALT,
                        help="CREATE2 salt text: the same salt, operator and owner give the same address")
    deploy.add_argument("--no-create2", action="store_true",
                        help="deploy with a plain CREATE even where the deterministic deployment proxy is")
    rotate.add_argument("--force", action="store_true",
                        help="rotate even with transactions of the old operator still in flight")
    return parser


def add_funding_wallets_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("funding-wallets", help="funding wallets: list, default, remove")
    commands = parser.add_subparsers(dest="funding_command", required=True)
    commands.add_parser("list", help="list the registered funding wallets (* marks the default)") \
        .add_argument("--org", required=True, help="the organisation's name")
    for name, what in (("default", "make a registered funding wallet the organisation's default"),
                       ("remove", "remove a funding wallet no open payment intent names")):
        command = commands.add_parser(name, help=what)
        command.add_argument("address", help="the funding wallet's address, any case")
        command.add_argument("--org", required=True, help="the organisation's name")
    return parser


def add_listen_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("listen", help="show the organisation's events live; forward them signed to a "
                                           "local server")
    parser.add_argument("--forward-to", metavar="URL", help="POST each event here, signed with the "
                                                            "session's secret (e.g. http://127.0.0.1:3000/hooks)")
    parser.add_argument("--events", help="only these event types (comma-separated; default: all)")
    parser.add_argument("--json", action="store_true",
                        help="print each event's whole body, one JSON per line")
    add_api_arguments(parser)
    return parser


def add_orgs_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("orgs", help="organisations: create, list")
    commands = parser.add_subparsers(dest="orgs_command", required=True)
    commands.add_parser("create", help="create an organisation").add_argument("name",
                                                                              help="its name (unique)")
    commands.add_parser("list", help="list the organisations")
    return parser


def add_secrets_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("secrets", help="stored secrets: re-seal them under the current key")
    commands = parser.add_subparsers(dest="secrets_command", required=True)
    commands.add_parser("reseal", help="seal every stored secret again under the first key of VIP_TOKEN_KEY")
    return parser


def add_sign_in_domains_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("sign-in-domains", help="the sites borrowers sign in on: list, add, remove")
    commands = parser.add_subparsers(dest="domains_command", required=True)
    commands.add_parser("list", help="list an organisation's sign-in domains and their URI prefixes") \
        .add_argument("--org", required=True, help="the organisation's name")
    add = commands.add_parser("add", help="register a domain (or replace its URI prefixes)")
    add.add_argument("domain", help="the site's host, with its port if it has one (app.lender.example)")
    add.add_argument("--uri-prefix", action="append", default=[], dest="uri_prefixes",
                     help="a URI a message may name starts with this (repeatable; default https://<domain>/)")
    add.add_argument("--org", required=True, help="the organisation's name")
    remove = commands.add_parser("remove", help="remove a domain: messages naming it are refused")
    remove.add_argument("domain", help="the domain as registered (app.lender.example)")
    remove.add_argument("--org", required=True, help="the organisation's name")
    return parser


def add_staff_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("staff", help="dashboard staff of an organisation: add, list, remove")
    commands = parser.add_subparsers(dest="staff_command", required=True)
    add = commands.add_parser("add", help="add a member who signs in to the dashboard")
    add.add_argument("--org", required=True, help="the organisation's name (it must exist)")
    add.add_argument("--email", required=True, help="the member's email (unique in the organisation)")
    add.add_argument("--role", required=True, choices=ROLES,
                     help="admin: keys, webhooks, audit log and every page; analyst: borrowers; "
                          "operator: networks")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from standard input instead of asking for it")
    commands.add_parser("list", help="list the organisation's members").add_argument(
        "--org", required=True, help="the organisation's name")
    remove = commands.add_parser("remove", help="remove a member (their sessions end at once)")
    remove.add_argument("--org", required=True, help="the organisation's name")
    remove.add_argument("--email", required=True, help="the member's email")
    return parser


def add_trigger_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("trigger", help="fire a test event of a type (a sample object, data.test true)")
    parser.add_argument("event_type", metavar="EVENT_TYPE", help=f"one of: {', '.join(EVENT_TYPES)}")
    add_api_arguments(parser)
    return parser


def add_watch_parser(sub) -> argparse.ArgumentParser:
    watch: argparse.ArgumentParser = sub.add_parser(
        "watch", help="add addresses to a network's watch set (backfilled)")
    watch.add_argument("network", help="a configured network (ethereum, polygon, base, arbitrum, local...)")
    watch.add_argument("address", nargs="*", help="0x addresses: lower-case, upper-case or checksummed")
    watch.add_argument("--file", metavar="PATH",
                       help="also read addresses from PATH, one a line, `#` comments allowed (- for standard "
                            "input); any number, written in one transaction")
    watch.add_argument("--reason", default="wallet", choices=["wallet", "counterparty", "spender"],
                       help="why it is watched (a counterparty is followed for fraud tracing)")
    start = watch.add_mutually_exclusive_group()
    start.add_argument("--start-block", type=int,
                       help="backfill from this block (default: the network's start block)")
    start.add_argument("--start-time",
                       help="ISO 8601 (UTC unless it names a zone); the history starts at the first block of "
                            "that hour (decision 232)")
    return watch


def add_webhooks_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("webhooks", help="webhook endpoints and events of an organisation")
    commands = parser.add_subparsers(dest="webhooks_command", required=True)
    create = commands.add_parser("create", help="register an endpoint; prints its signing secret once")
    create.add_argument("--org", required=True, help="the organisation's name")
    create.add_argument("--url", required=True,
                        help="https URL that receives the events (http on loopback in development)")
    create.add_argument("--event-types", default=ALL, help="comma-separated event types, or * for all")
    create.add_argument("--description", help="what the endpoint is for (shown in listings)")
    commands.add_parser("list", help="list the endpoints").add_argument("--org", required=True,
                                                                        help="the organisation's name")
    for name, what in (("delete", "stop delivering to an endpoint"),
                       ("enable", "deliver again to an endpoint disabled for failing"),
                       ("rotate-secret", "issue a new secret; the old one signs during the overlap")):
        command = commands.add_parser(name, help=what)
        command.add_argument("endpoint_id", help="the endpoint's id (whe_...), as `vip webhooks list` shows")
        command.add_argument("--org", required=True, help="the organisation's name")
    listing = commands.add_parser("events", help="recent events with their delivery status")
    listing.add_argument("--org", required=True, help="the organisation's name")
    listing.add_argument("--type", help="only events of this type")
    listing.add_argument("--status", choices=DELIVERY_STATUSES,
                         help="only events whose delivery is in this state")
    listing.add_argument("--limit", type=int, default=20, help="how many of the newest events")
    replay = commands.add_parser("replay", help="deliver an event again")
    replay.add_argument("event_id", help="the event's id (evt_...)")
    replay.add_argument("--org", required=True, help="the organisation's name")
    replay.add_argument("--endpoint", help="only to this endpoint id (default: every subscribed endpoint)")
    return parser
