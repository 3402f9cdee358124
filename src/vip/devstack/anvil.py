"""Start and stop a local Anvil node (from the pinned npm package) and wait until it answers."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from vip.config import anvil_override
from vip.devstack.errors import AnvilNotFound

# The npm package @foundry-rs/anvil ships the binary in a per-platform package.
NPM_ANVIL_GLOB = "@foundry-rs/anvil-*/bin/anvil"
ANVIL_HELP = ("Anvil not found: install it with `npm install @foundry-rs/anvil@1.7.1` (in this folder or a "
              "parent), put `anvil` on PATH, or set VIP_ANVIL_BIN to its path")
# Anvil's well-known dev mnemonic; its accounts are public test keys, never real funds.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
# The first ten accounts of that mnemonic (m/44'/60'/0'/0/i), Anvil's default accounts, written out:
# deriving them took a fifth of a second in every process that imports this module.
# tests/test_dev_keys.py derives them again from the mnemonic.
DEV_PRIVATE_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)


def anvil_binary(start: Path | None = None) -> Path:
    """Anvil, looked for in order: $VIP_ANVIL_BIN, `anvil` on PATH, then `node_modules` in `start` (the
    working directory) or its nearest parent that has one, as npm itself resolves packages."""
    override = anvil_override()
    if override:
        if not Path(override).is_file():
            raise AnvilNotFound(f"VIP_ANVIL_BIN={override} is not a file. {ANVIL_HELP}")
        return Path(override)
    on_path = shutil.which("anvil")
    if on_path:
        return Path(on_path)
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        found = sorted((candidate / "node_modules").glob(NPM_ANVIL_GLOB))
        if found:
            return found[0]
    raise AnvilNotFound(ANVIL_HELP)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports: all held open together while chosen (ports chosen one after
    another may repeat, and then two services of one stack collide)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def rpc_call(url: str, method: str, params: list | None = None, timeout: float = 10.0):
    """A blocking JSON-RPC call, for tooling and tests (the indexer has its own async client)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        reply = json.loads(resp.read())
    if "error" in reply:
        raise RuntimeError(f"{method} failed: {reply['error']}")
    return reply["result"]


def saved_head_timestamp(state_path: Path) -> int | None:
    """The timestamp of the head block in a state file Anvil dumped (`--state`), None when there is none
    or it cannot be read. Anvil started on a state with `--timestamp` takes that as its time, so a restart
    passes this (plus one) to go on from its head, never back before it."""
    try:
        return int(json.loads(state_path.read_text())["block"]["timestamp"], 16)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class AnvilNode:
    """A running Anvil process."""

    chain_id: int
    port: int
    process: subprocess.Popen
    log_path: Path | None = None
    private_keys: tuple[str, ...] = field(default=DEV_PRIVATE_KEYS)

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, method: str, params: list | None = None):
        return rpc_call(self.rpc_url, method, params)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_anvil(
    chain_id: int = 31337,
    port: int | None = None,
    genesis_timestamp: int | None = None,
    state_path: Path | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
    ready_timeout_s: float = 30.0,
) -> AnvilNode:
    """Start Anvil (automine) and block until it answers `eth_chainId`."""
    port = port or free_port()
    args = [
        str(anvil_binary()),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--chain-id", str(chain_id),
        "--mnemonic", DEV_MNEMONIC,
        "--accounts", str(len(DEV_PRIVATE_KEYS)),
        "--balance", "1000000",
    ]
    if genesis_timestamp is not None:
        args += ["--timestamp", str(genesis_timestamp)]
    if state_path is not None:
        args += ["--state", str(state_path), "--state-interval", "30"]
    args += extra_args or []
    out = log_path.open("ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = AnvilNode(chain_id=chain_id, port=port, process=process, log_path=log_path)
    deadline = time.monotonic() + ready_timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"Anvil exited with code {process.returncode} (args: {args})")
        try:
            if int(node.call("eth_chainId"), 16) == chain_id:
                return node
        except OSError:
            pass
        if time.monotonic() > deadline:
            node.kill()
            raise TimeoutError(f"Anvil on port {port} did not answer within {ready_timeout_s}s")
        time.sleep(0.05)
