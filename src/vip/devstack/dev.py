"""`vip dev`: the whole stack on one machine: embedded PostgreSQL, Anvil, contracts, indexer, API."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eth_account import Account
from web3 import Web3

from vip.accounts import keys
from vip.client import VipClient
from vip.config import ENV_CONFIG_FILES, ENV_DATABASE_URL, ENV_OPERATOR_KEY, ConfigError, load_settings
from vip.dashboard import staff
from vip.devstack.anvil import AnvilNode, saved_head_timestamp, start_anvil
from vip.devstack.console import vip_console_script
from vip.devstack.demo import demo_calls, demo_outcome, seed_demo
from vip.devstack.deploy import LocalContracts, deploy_local_contracts
from vip.devstack.errors import PortBusy
from vip.devstack.postgres import embedded_postgres_url, to_sqlalchemy_url
from vip.devstack.provider import ProviderStandIn
from vip.personas.catalogue import PERSONAS
from vip.store.engine import create_engine, migrate

LOCAL_NETWORK = "local"
DEV_ORGANISATION = "demo"
DEV_ADMIN_EMAIL = "admin@demo.local"  # the dashboard's dev sign-in (organisation "demo")
LOCAL_CHAIN_ID = 31337
GENESIS_AGE = timedelta(days=395)  # about 13 months: a year of history fits before "now"


@dataclass(frozen=True)
class DevKeys:
    deployer: str  # also the token minter
    operator: str  # calls Disbursement.disburse


def dev_keys(node: AnvilNode) -> DevKeys:
    return DevKeys(deployer=node.private_keys[0], operator=node.private_keys[1])


def local_network_toml(node: AnvilNode, contracts: LocalContracts, finality_depth: int = 3,
                       rpc_url: str | None = None) -> str:
    """The local network's settings; `rpc_url` (the provider stand-in's, say) instead of Anvil's own."""
    return f"""# Written by `vip dev`; overlaid on config/ through ${ENV_CONFIG_FILES}.
[networks.{LOCAL_NETWORK}]
chain_id = {node.chain_id}
rpc_url = "{rpc_url or node.rpc_url}"
local = true
finality_depth = {finality_depth}
poll_interval_s = 0.5
max_block_range = 5000
mode = "watched"
start_block = 0
disbursement_contract = "{contracts.disbursement}"

[networks.{LOCAL_NETWORK}.tokens.USDC]
address = "{contracts.usdc}"
decimals = 6

[networks.{LOCAL_NETWORK}.tokens.USDT]
address = "{contracts.usdt}"
decimals = 6
"""


def _has_code(w3: Web3, address: str) -> bool:
    return len(w3.eth.get_code(Web3.to_checksum_address(address))) > 0


def ensure_contracts(node: AnvilNode, data_dir: Path) -> LocalContracts:
    """Reuse the contracts of a previous run when the (restored) chain still has them; else deploy."""
    saved = data_dir / "contracts.json"
    w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
    if saved.exists():
        contracts = LocalContracts(**json.loads(saved.read_text()))
        if all(_has_code(w3, a) for a in (contracts.usdc, contracts.usdt, contracts.disbursement)):
            return contracts
    keys = dev_keys(node)
    deployer = Account.from_key(keys.deployer).address
    operator = Account.from_key(keys.operator).address
    contracts = deploy_local_contracts(w3, keys.deployer, operator, deployer)
    saved.write_text(json.dumps(contracts.__dict__, indent=2) + "\n")
    return contracts


def dev_api_key(database_url: str, saved: Path) -> str:
    """The demo organisation's all-scopes key: the one saved by a previous run while it still works,
    else a new one. NOTE: kept in plain text in the dev data directory only; production keys are shown
    once and stored as hashes."""
    previous = saved.read_text().strip() if saved.exists() else None

    async def find_or_create() -> str:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as conn:
                if previous and await keys.authenticate(conn, previous):
                    return previous
                org_id = await keys.ensure_organisation(conn, DEV_ORGANISATION)
                secret, _ = await keys.create_key(conn, org_id, list(keys.SCOPES), "vip dev")
                return secret
        finally:
            await engine.dispose()

    secret = asyncio.run(find_or_create())
    if secret != previous:
        saved.write_text(secret + "\n")
        saved.chmod(0o600)
    return secret


def dev_dashboard_admin(database_url: str, saved: Path) -> str:
    """The password of the demo organisation's dashboard admin (DEV_ADMIN_EMAIL): the one saved by a
    previous run while it still signs in, else a new random one (the member is made again with it). Kept
    in plain text in the dev data directory only, like the dev API key; `vip dev` runs local networks
    only, where the dashboard's cookies are not Secure (plain http on loopback)."""
    previous = saved.read_text().strip() if saved.exists() else None

    async def find_or_create() -> str:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.begin() as conn:
                if previous and await staff.check_credentials(conn, DEV_ORGANISATION, DEV_ADMIN_EMAIL,
                                                              previous):
                    return previous
                org_id = await keys.ensure_organisation(conn, DEV_ORGANISATION)
                await staff.remove_member(conn, org_id, DEV_ADMIN_EMAIL)
                password = secrets.token_urlsafe(12)
                await staff.add_member(conn, org_id, DEV_ADMIN_EMAIL, password, "admin")
                return password
        finally:
            await engine.dispose()

    password = asyncio.run(find_or_create())
    if password != previous:
        saved.write_text(password + "\n")
        saved.chmod(0o600)
    return password


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout_s}s")
        time.sleep(0.1)


def run_dev(data_dir: Path, state_file: Path | None, anvil_port: int, api_port: int,
            metrics_port: int, demo: bool = True, configured_database_url: str | None = None,
            reset: bool = False, personas: list[str] | None = None, provider: str | None = None) -> int:
    """Start everything, print where it is, block until Ctrl-C, then stop everything cleanly. The database
    is `configured_database_url` (the settings' DATABASE_URL) when given, else an embedded one. `reset`
    first throws the data directory away (embedded database, chain, demo, dev key): a fresh start. With
    `provider` (a profile of vip.devstack.provider), the indexer and API reach Anvil through that
    provider's stand-in and meet its limits."""
    # Ports first: a busy one may be a stack running on this very data directory, which a reset must not pull
    # from under it.
    unknown = sorted(set(personas or []) - set(PERSONAS))
    if unknown:
        raise ConfigError(f"unknown persona {', '.join(unknown)}: one of {', '.join(PERSONAS)}")
    refuse_busy_ports({"--anvil-port": anvil_port, "--api-port": api_port, "--metrics-port": metrics_port})
    if reset:
        reset_data_dir(data_dir, configured_database_url)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    database_url = (to_sqlalchemy_url(configured_database_url) if configured_database_url
                    else embedded_postgres_url(data_dir / "pg"))
    migrate(database_url)

    anvil_state = data_dir / "anvil-state.json"
    # A chain restored from the data directory goes on from its head's time (which test clocks may have
    # moved far past the wall clock); only a new chain starts at the genesis, about 13 months ago.
    restored_head = saved_head_timestamp(anvil_state)
    genesis = int((datetime.now(UTC) - GENESIS_AGE).timestamp())
    node = start_anvil(chain_id=LOCAL_CHAIN_ID, port=anvil_port,
                       genesis_timestamp=genesis if restored_head is None else restored_head + 1,
                       state_path=anvil_state, log_path=data_dir / "anvil.log")
    children: list[subprocess.Popen] = []
    stand_in = ProviderStandIn(node.rpc_url, provider) if provider else None
    try:
        contracts = ensure_contracts(node, data_dir)
        local_config = data_dir / "networks.local.toml"
        rpc_url = stand_in.start() if stand_in is not None else None
        local_config.write_text(local_network_toml(node, contracts, rpc_url=rpc_url))
        overlay = data_dir / "service.local.toml"
        base_url = f"http://127.0.0.1:{api_port}"
        # Commands run in the checkout against this database take this overlay too (vip.cli.dev_stack).
        overlay.write_text(f'database_url = {json.dumps(database_url)}\n\n'
                           f'[api]\nport = {api_port}\npublic_base_url = "{base_url}"\n\n'
                           f'[daemon]\nmetrics_port = {metrics_port}\n\n[webhooks]\nallow_http = true\n')
        env = dict(os.environ)
        env[ENV_DATABASE_URL] = database_url
        env[ENV_CONFIG_FILES] = os.pathsep.join([str(local_config), str(overlay)])
        # The contract's operator: a funded Anvil dev account, handed to the daemon alone in its environment
        # (the API never signs; it holds no key).
        operator_key = env.pop(ENV_OPERATOR_KEY, None) or dev_keys(node).operator
        settings = load_settings(environ=env)
        vip = [vip_console_script()]
        logs = data_dir / "logs"
        logs.mkdir(exist_ok=True)
        for role, role_env in (("index", {**env, ENV_OPERATOR_KEY: operator_key}), ("serve", env)):
            out = (logs / f"{role}.log").open("ab")
            children.append(subprocess.Popen([*vip, role], env=role_env, stdout=out,
                                             stderr=subprocess.STDOUT))
        # Ready, not only alive: the daemon has registered as the charge executor (a charge sent before
        # would be answered 503).
        wait_http(f"http://127.0.0.1:{metrics_port}/readyz", 60, children[0])
        wait_http(f"{base_url}/healthz", 60, children[1])
        api_key = dev_api_key(database_url, data_dir / "dev-api-key")
        dashboard_password = dev_dashboard_admin(database_url, data_dir / "dev-dashboard-password")

        network = settings.network(LOCAL_NETWORK)
        borrowers = []
        if demo:
            print("seeding the demo borrowers (six months of salary on chain, platform records)...",
                  flush=True)
            borrowers = seed_demo(VipClient(base_url, api_key), node.rpc_url, contracts.usdc,
                                  dev_keys(node).deployer, data_dir)
        state = {
            "base_url": base_url,
            "api_key": api_key,
            "database_url": database_url,
            "metrics_url": f"http://127.0.0.1:{metrics_port}/metrics",
            "networks": {LOCAL_NETWORK: {
                "rpc_url": node.rpc_url,
                "chain_id": node.chain_id,
                "tokens": {s: t.address for s, t in network.tokens.items()},
                "disbursement_contract": contracts.disbursement,
                "minter_private_key": dev_keys(node).deployer,
            }},
            "demo_borrowers": [b.__dict__ for b in borrowers],
            "dashboard": {"url": f"{base_url}/dashboard", "organisation": DEV_ORGANISATION,
                          "email": DEV_ADMIN_EMAIL, "password": dashboard_password},
        }
        if state_file is not None:
            state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(state, indent=2) + "\n")
            tmp.replace(state_file)  # readers never see a half-written file
        chain_time = (f"genesis {datetime.fromtimestamp(genesis, UTC):%Y-%m-%d}" if restored_head is None else
                      f"restored, head at {datetime.fromtimestamp(restored_head, UTC):%Y-%m-%d %H:%M} UTC")
        print(f"""vip dev is running (Ctrl-C stops everything)
  database   {'DATABASE_URL' if configured_database_url else 'embedded PostgreSQL in ' + str(data_dir / 'pg')}
  anvil      {node.rpc_url} (chain id {node.chain_id}, {chain_time})
  rpc        {f'{rpc_url} (stand-in of {provider})' if stand_in else node.rpc_url}
  USDC       {contracts.usdc}
  USDT       {contracts.usdt}
  contract   {contracts.disbursement} (Disbursement)
  indexer    metrics http://127.0.0.1:{metrics_port}/metrics, log {logs / 'index.log'}
  api        {base_url}/readyz, reference {base_url}/docs, log {logs / 'serve.log'}
  api key    {api_key} (organisation "{DEV_ORGANISATION}", all scopes)
  dashboard  {base_url}/dashboard (sign in: organisation "{DEV_ORGANISATION}", {DEV_ADMIN_EMAIL},
             password {dashboard_password})
  state      {state_file or '(pass --state-file PATH to write one)'}""", flush=True)
        for name in personas or []:
            made = VipClient(base_url, api_key).create_persona(name)
            expected = made["expected"]
            print(f"\npersona {name}: user {made['user_id']}, wallet {made['wallets']['borrower']}, "
                  f"test clock {made['test_clock']} at {made['frozen_time']}; expected {expected['status']}, "
                  f"{expected['periods_verified']}/6 months, {expected['recommendation'] or 'no score'}",
                  flush=True)
        for borrower in borrowers:
            print(f"\ndemo borrower {borrower.name} ({borrower.user_id}, wallet {borrower.wallet}):"
                  f" {borrower.story}")
            for line in demo_calls(base_url, api_key, borrower):
                print("  " + line)
        sys.stdout.flush()
        stop = _StopSignal()
        if borrowers:
            print("\nwhat a lender sees (the daemon makes each VIP in the background):", flush=True)
        for borrower in borrowers:
            for line in demo_outcome(VipClient(base_url, api_key), borrower, stopped=stop.is_set):
                print(f"  {borrower.name}: {line}", flush=True)
        return 0 if _wait_for_signal(children, stop) else 1
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
        if stand_in is not None:
            stand_in.stop()
        node.stop()  # SIGTERM: Anvil writes its state for the next run


class _StopSignal:
    """Ctrl-C (SIGINT) or SIGTERM, noted from the moment the stack is up, so every wait can end cleanly."""

    def __init__(self) -> None:
        self.flag = False
        signal.signal(signal.SIGINT, self._note)
        signal.signal(signal.SIGTERM, self._note)

    def _note(self, signum, frame) -> None:
        self.flag = True

    def is_set(self) -> bool:
        return self.flag


def _wait_for_signal(children: list[subprocess.Popen], stop: _StopSignal) -> bool:
    """Wait for Ctrl-C (True) or for a child to die (False: `vip dev` then exits non-zero)."""
    while not stop.is_set():
        for child in children:
            if child.poll() is not None:
                print(f"a child process exited with code {child.returncode}; stopping", file=sys.stderr)
                return False
        time.sleep(0.2)
    print("stopping...", flush=True)
    return True


def reset_data_dir(data_dir: Path, configured_database_url: str | None) -> None:
    """Remove what `vip dev` keeps between runs. Refused with DATABASE_URL set: that database would keep the
    old chain's rows while the chain starts afresh, and dropping someone's database is not ours to do."""
    if configured_database_url:
        raise ConfigError("--reset starts from an empty embedded database and a new chain; with DATABASE_URL "
                          "set, drop and recreate that database yourself, or unset DATABASE_URL")
    if data_dir.exists():
        shutil.rmtree(data_dir)
        print(f"reset: removed {data_dir}", flush=True)


def refuse_busy_ports(ports: dict[str, int]) -> None:
    """Refuse before starting anything: a busy port would otherwise be answered by whatever holds it (a
    stack left running), and `vip dev` would report itself up while its own process died."""
    for option, port in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # As the servers bind: only a listener makes the port busy, not a closed socket in TIME_WAIT.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                raise PortBusy(f"port {port} on 127.0.0.1 is in use (another `vip dev`?): stop what holds it "
                               f"or pass {option} PORT") from None
