"""The service's own commands: `vip dev`, `vip index`, `vip serve`. The checks before a daemon starts
(networks, production secrets, the disbursement contracts) are here; the daemons are vip.daemon and
vip.api.app."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import structlog
from aiohttp import web
from web3 import Web3

from vip.api.app import create_app
from vip.chain.deployment import contract_problem
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.cli.dev_stack import database_url
from vip.config import Settings
from vip.daemon import run_daemon
from vip.devstack.dev import run_dev
from vip.production_secrets import production_secret_problems
from vip.store.engine import migrate

log = structlog.get_logger("vip.cli")


def _run_until_signal(main) -> None:
    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())


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
