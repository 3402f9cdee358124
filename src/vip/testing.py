"""pytest plugin for integrators: the whole service (embedded PostgreSQL, Anvil with the contracts, the
indexer daemon and the API) started once per test session, with a client, funded accounts and helpers.

It is registered through the `pytest11` entry point, so installing the package is enough:

    def test_my_lender_onboards_a_borrower(vip_client, vip_accounts):
        user = vip_client.post("/v1/users", {"external_id": "b-1"}).body["user"]
        wallet = vip_client.connect_wallet(user["id"], vip_accounts.borrowers[0])
        assert wallet["status"] == "active"

The stack is `vip dev --no-demo` in a subprocess with its own temporary data directory and free ports
(DATABASE_URL and VIP_CONFIG of the calling environment are ignored, so a test session never touches
another database). Fixtures: `vip_stack` (session), `vip_client`, `vip_accounts` (session), `vip_persona`
(a preset borrower by name: docs/personas.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from vip.client import VipClient
from vip.devstack.anvil import DEV_PRIVATE_KEYS, free_ports
from vip.devstack.console import vip_console_script

STARTUP_TIMEOUT_S = 180
NETWORK = "local"
__all__ = ["FundedAccounts", "VipClient", "VipStack", "funded_accounts"]
# Anvil's first two dev accounts deploy the contracts (and mint) and operate the disbursement contract.
RESERVED_ACCOUNTS = 2


@dataclass
class VipStack:
    """A running `vip dev`: where everything is, from its state file."""

    base_url: str
    api_key: str
    database_url: str
    metrics_url: str
    rpc_url: str
    chain_id: int
    tokens: dict[str, str]
    disbursement_contract: str
    minter_private_key: str
    data_dir: Path
    process: subprocess.Popen = field(repr=False)

    @classmethod
    def start(cls, data_dir: Path, *, env: dict[str, str] | None = None,
              timeout_s: float = STARTUP_TIMEOUT_S, extra_args: tuple[str, ...] = ()) -> VipStack:
        """Start `vip dev` on free ports and wait until its state file says it is ready; `extra_args` go to
        `vip dev` as they are (`("--provider", "alchemy")`, say)."""
        data_dir.mkdir(parents=True, exist_ok=True)
        state_file = data_dir / "state.json"
        state_file.unlink(missing_ok=True)
        if env is None:
            env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VIP_CONFIG")}
        anvil_port, api_port, metrics_port = free_ports(3)
        args = [vip_console_script(), "dev", "--data-dir", str(data_dir), "--state-file",
                str(state_file), "--anvil-port", str(anvil_port), "--api-port", str(api_port),
                "--metrics-port", str(metrics_port), "--no-demo", *extra_args]
        log = (data_dir / "vip-dev.log").open("ab")
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while not state_file.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"vip dev exited with {proc.returncode}: {why_not_started(data_dir)}")
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"vip dev not ready within {timeout_s}s: {why_not_started(data_dir)}")
            time.sleep(0.2)
        state = json.loads(state_file.read_text())
        local = state["networks"][NETWORK]
        return cls(state["base_url"], state["api_key"], state["database_url"], state["metrics_url"],
                   local["rpc_url"], local["chain_id"], local["tokens"], local["disbursement_contract"],
                   local["minter_private_key"], data_dir, proc)

    def stop(self) -> int:
        """Ctrl-C, as a developer would: every child stops; returns vip dev's exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def why_not_started(data_dir: Path, tail: int = 12) -> str:
    """What the failed start said: `vip dev`'s one-line error when it gave one (a busy port, a missing
    Anvil, a bad configuration), else the end of its log and of its children's."""
    logs = [data_dir / "vip-dev.log", data_dir / "logs" / "serve.log", data_dir / "logs" / "index.log"]
    said = {log: log.read_text(errors="replace").splitlines() for log in logs if log.exists()}
    own = [line for line in said.get(logs[0], []) if line.startswith("vip dev: ")]
    if own:
        return own[-1]
    parts = [f"last lines of {log}:\n" + "\n".join(lines[-tail:]) for log, lines in said.items() if lines]
    return "\n".join(parts) or f"nothing logged in {data_dir}"


@dataclass(frozen=True)
class FundedAccounts:
    """Anvil's funded dev accounts not used by the stack itself, for the test's borrowers and lenders."""

    borrowers: list[LocalAccount]
    lenders: list[LocalAccount]
    minter: LocalAccount


def funded_accounts(stack: VipStack) -> FundedAccounts:
    free = [Account.from_key(k) for k in DEV_PRIVATE_KEYS[RESERVED_ACCOUNTS:]]
    half = len(free) // 2
    return FundedAccounts(borrowers=free[:half], lenders=free[half:],
                          minter=Account.from_key(stack.minter_private_key))


# --- fixtures ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def vip_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VipStack]:
    """The whole service, started once per test session (about 10 s) and stopped at its end."""
    stack = VipStack.start(Path(tmp_path_factory.mktemp("vip-stack")))
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def vip_client(vip_stack: VipStack) -> VipClient:
    """A client of the stack's API with an all-scopes key of the demo organisation."""
    return VipClient(vip_stack.base_url, vip_stack.api_key)


@pytest.fixture
def vip_persona(vip_client: VipClient) -> Callable[[str], dict]:
    """Make a preset borrower: `vip_persona("steady_salaried")` returns its user id, wallets, test clock
    and `expected` outcome (GET /v1/dev/personas lists them; docs/personas.md describes each)."""
    return vip_client.create_persona


@pytest.fixture(scope="session")
def vip_accounts(vip_stack: VipStack) -> FundedAccounts:
    """Funded Anvil accounts for borrowers and lenders, and the token minter."""
    return funded_accounts(vip_stack)
