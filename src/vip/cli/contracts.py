"""`vip contracts deploy | verify | set-operator --network NAME`: the disbursement contract on a real network.

Keys come from the environment only, never from a flag or a file the command writes, and are never printed:
the deployer (and owner) is $VIP_DEPLOYER_KEY (or `disbursement.deployer_keystore` with
$VIP_DEPLOYER_KEYSTORE_PASSWORD), else the operator's key; the operator is $VIP_OPERATOR_KEY's address (or
the keystore's), or `--operator ADDRESS`. The address deployed is written to an overlay file the service
reads ($VIP_CONFIG): `networks.NAME.disbursement_contract` and `disbursement.operator_address`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from eth_utils import is_address, to_checksum_address
from sqlalchemy import func, select
from web3 import Web3

from vip.chain import deployment
from vip.chain.operator import OperatorKeyMissing, load_deployer, load_operator
from vip.cli.dev_stack import database_url
from vip.cli.parser import OVERLAY_NAME
from vip.config import Settings, config_overlay_files
from vip.store.engine import create_engine
from vip.store.tables import charges, disbursement_transactions


def _fail(message: str) -> int:
    print(f"vip contracts: {message}", file=sys.stderr)
    return 2


def _web3(settings: Settings, name: str) -> tuple[Web3, int] | str:
    if name not in settings.networks:
        return f"no network {name!r} is configured ({', '.join(sorted(settings.networks))})"
    network = settings.network(name)
    if not network.rpc_url:
        return f"{name} has no RPC URL: set {network.rpc_url_env or 'its rpc_url'}"
    w3 = Web3(Web3.HTTPProvider(network.rpc_url, request_kwargs={"timeout": 60}))
    chain_id = w3.eth.chain_id
    if chain_id != network.chain_id:
        return f"{name}'s RPC answers chain id {chain_id}, the configuration says {network.chain_id}"
    return w3, chain_id


def overlay_path(args: argparse.Namespace) -> Path | str:
    if args.overlay:
        return Path(args.overlay)
    named = [p for p in config_overlay_files() if p.name == OVERLAY_NAME]
    if not named:
        return (f"name the overlay to write with --overlay PATH (or list a file named {OVERLAY_NAME} in "
                "$VIP_CONFIG)")
    return named[-1]


def run_contracts_command(settings: Settings, database_url: str, args: argparse.Namespace) -> int:
    connected = _web3(settings, args.network)
    if isinstance(connected, str):
        return _fail(connected)
    w3, _ = connected
    if args.contracts_command == "deploy":
        return _deploy(settings, args, w3)
    if args.contracts_command == "verify":
        return _verify(settings, args, w3)
    return _set_operator(settings, database_url, args, w3)


def _operator_address(settings: Settings, given: str | None) -> str | None:
    if given:
        return given
    try:
        return str(load_operator(settings.disbursement).address)
    except OperatorKeyMissing:
        return settings.disbursement.operator_address


def _deploy(settings: Settings, args: argparse.Namespace, w3: Web3) -> int:
    path = overlay_path(args)
    if isinstance(path, str):
        return _fail(path)
    try:
        deployer = load_deployer(settings.disbursement)
    except OperatorKeyMissing as exc:
        return _fail(str(exc))
    operator = _operator_address(settings, args.operator)
    if operator is None:
        return _fail("no operator: set $VIP_OPERATOR_KEY (its address is used, the key is not kept) or "
                     "pass --operator ADDRESS")
    owner = args.owner or deployer.address
    for label, value in (("operator", operator), ("owner", owner)):
        if not is_address(value):
            return _fail(f"--{label} {value!r} is not an address")
    try:
        deployed = deployment.deploy_disbursement(w3, deployer.key.to_0x_hex(), operator, owner, args.salt,
                                                  deterministic=not args.no_create2)
    except deployment.DeploymentRefused as exc:
        return _fail(str(exc))
    state = deployment.read_contract(w3, deployed.address)
    write_overlay(path, args.network, deployed.address, str(state.operator))
    how = (f"CREATE2 via {deployment.DETERMINISTIC_DEPLOYER}, salt {args.salt!r}"
           if deployed.method == "create2" else "CREATE: no deterministic deployment proxy on this chain"
           if not args.no_create2 else "CREATE")
    what = "already deployed" if deployed.already else f"deployed in block {deployed.block_number}"
    print(f"{args.network}: Disbursement {deployed.address} {what} ({how}), operator {state.operator}, "
          f"owner {state.owner}, written to {path}")
    return 0


def _verify(settings: Settings, args: argparse.Namespace, w3: Web3) -> int:
    network = settings.network(args.network)
    if not network.disbursement_contract:
        return _fail(f"{args.network} has no disbursement_contract configured (vip contracts deploy)")
    operator = _operator_address(settings, None)
    problem = deployment.contract_problem(w3, network.chain_id, network.disbursement_contract, operator)
    if problem:
        return _fail(f"{args.network}: {problem}")
    state = deployment.read_contract(w3, network.disbursement_contract)
    print(f"{args.network}: Disbursement {state.address} is ours, operator {state.operator}, "
          f"owner {state.owner}")
    return 0


def _set_operator(settings: Settings, database_url: str, args: argparse.Namespace, w3: Web3) -> int:
    network = settings.network(args.network)
    if not network.disbursement_contract:
        return _fail(f"{args.network} has no disbursement_contract configured (vip contracts deploy)")
    if not is_address(args.operator):
        return _fail(f"{args.operator!r} is not an address")
    path = overlay_path(args)
    if isinstance(path, str):
        return _fail(path)
    in_flight = asyncio.run(_transactions_in_flight(database_url, args.network))
    if in_flight and not args.force:
        return _fail(f"{args.network}: {in_flight} disburse() transactions of the current operator are not "
                     "mined yet and only its key can replace them: run `vip index` with it until they are "
                     "(or pass --force)")
    try:
        deployer = load_deployer(settings.disbursement)
        tx_hash = deployment.set_operator(w3, network.disbursement_contract, deployer.key.to_0x_hex(),
                                          args.operator)
    except (OperatorKeyMissing, deployment.DeploymentRefused) as exc:
        return _fail(str(exc))
    write_overlay(path, args.network, network.disbursement_contract, to_checksum_address(args.operator))
    print(f"{args.network}: Disbursement {network.disbursement_contract} operator is now "
          f"{to_checksum_address(args.operator)} (transaction {tx_hash}), written to {path}")
    return 0


async def _transactions_in_flight(database_url: str, network: str) -> int:
    """Disbursement transactions of pending charges on `network` that are not mined."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            count = await conn.scalar(
                select(func.count()).select_from(disbursement_transactions.join(
                    charges, charges.c.id == disbursement_transactions.c.charge_id))
                .where(charges.c.status == "pending", disbursement_transactions.c.network == network,
                       disbursement_transactions.c.block_number.is_(None)))
    finally:
        await engine.dispose()
    return int(count or 0)


# --- the overlay ---------------------------------------------------------------------------------------

def write_overlay(path: Path, network: str, contract: str, operator: str) -> None:
    """Set `networks.NETWORK.disbursement_contract` and `disbursement.operator_address` in the overlay at
    `path` (created if missing; the rest of what it holds is kept, its comments are not)."""
    raw: dict = {}
    if path.exists():
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    raw.setdefault("networks", {}).setdefault(network, {})["disbursement_contract"] = contract
    raw.setdefault("disbursement", {})["operator_address"] = operator
    text = "# Written by `vip contracts`: the disbursement contracts and their operator.\n" + _toml(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    raise ValueError(f"cannot write {type(value).__name__} to TOML")


def _toml(table: Mapping, prefix: str = "") -> str:
    lines = [f"{key} = {_scalar(value)}" for key, value in table.items() if not isinstance(value, Mapping)]
    out = ("\n".join(lines) + "\n") if lines else ""
    for key, value in table.items():
        if isinstance(value, Mapping):
            name = f"{prefix}.{key}" if prefix else key
            body = _toml(value, name)
            out += f"\n[{name}]\n{body}" if any(not isinstance(v, Mapping) for v in value.values()) else body
    return out


def cmd_contracts(settings: Settings, args: argparse.Namespace) -> int:
    return run_contracts_command(settings, database_url(settings), args)
