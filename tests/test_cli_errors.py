"""The `vip` command's common mistakes answered in one line with the fix (exit 2), never a traceback; the
version and the defaults in every help; one log format for our lines and the libraries'. Real processes,
real PostgreSQL."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.support.webhooks import PRODUCTION_SECRETS
from vip.cli import build_parser
from vip.devstack.anvil import free_port, free_ports
from vip.devstack.dev import wait_http
from vip.metrics import package_version
from vip.store.tables import organisations

VIP = [sys.executable, "-m", "vip.cli"]


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("VIP_RPC_") and k != "VIP_CONFIG"}
    return subprocess.run([*VIP, *args], env={**base, **env}, capture_output=True, text=True, timeout=120)


def one_line_refusal(done: subprocess.CompletedProcess, command: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"vip {command}: ")
    return line


@pytest.mark.e2e
def test_unreachable_database_is_one_line_without_the_password():
    url = f"postgresql://lender:hunter2@127.0.0.1:{free_port()}/vip"
    line = one_line_refusal(run("migrate", DATABASE_URL=url), "migrate")
    assert f"postgresql://lender:***@127.0.0.1:{url.split(':')[3]}" in line and "hunter2" not in line
    assert "Connection refused" in line and "Fix DATABASE_URL" in line


@pytest.mark.e2e
def test_a_database_url_that_is_not_postgres():
    line = one_line_refusal(run("migrate", DATABASE_URL="mysql://root@127.0.0.1/vip"), "migrate")
    assert "DATABASE_URL must be a postgresql:// URL" in line


@pytest.mark.e2e
def test_a_toml_error_names_the_file(tmp_path):
    broken = tmp_path / "service.local.toml"
    broken.write_text("[api\nport = 8080\n")
    line = one_line_refusal(run("status", VIP_CONFIG=str(broken)), "status")
    assert line.startswith(f"vip status: {broken}: not valid TOML: ") and "line 1" in line


@pytest.mark.e2e
def test_an_unknown_key_is_named_with_the_files_it_may_come_from(tmp_path):
    overlay = tmp_path / "ops.toml"
    overlay.write_text("[api]\nprot = 8080\n")
    line = one_line_refusal(run("status", VIP_CONFIG=str(overlay)), "status")
    assert "configuration key api.prot: Extra inputs are not permitted" in line and str(overlay) in line


@pytest.mark.e2e
def test_serve_on_a_busy_port_exits_non_zero_naming_the_port(database_url):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--allow-no-networks", "--port", str(port), DATABASE_URL=database_url,
                   **PRODUCTION_SECRETS)
    line = one_line_refusal(done, "serve")
    assert str(port) in line and "address already in use" in line and "--port" in line


@pytest.mark.e2e
def test_serve_says_where_it_listens(database_url, tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIP_RPC_") and k != "VIP_CONFIG"}
    with log.open("ab") as out:
        env = {**env, "DATABASE_URL": database_url, "VIP_LOG_FORMAT": "json", **PRODUCTION_SECRETS}
        proc = subprocess.Popen([*VIP, "serve", "--allow-no-networks", "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 60, proc)
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    [listening] = [line for line in lines if line["event"] == "api listening"]
    assert listening["url"] == f"http://127.0.0.1:{port}" and listening["readiness"].endswith("/readyz")


@pytest.mark.e2e
def test_dev_refuses_a_busy_port_before_starting_anything(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        anvil_port, metrics_port = free_ports(2)
        data_dir = tmp_path / "dev"
        done = run("dev", "--data-dir", str(data_dir), "--api-port", str(busy), "--anvil-port",
                   str(anvil_port), "--metrics-port", str(metrics_port))
    line = one_line_refusal(done, "dev")
    assert f"port {busy} on 127.0.0.1 is in use" in line and "--api-port" in line
    assert not data_dir.exists()  # nothing was started or written


@pytest.mark.e2e
def test_dev_without_anvil_says_how_to_install_it(tmp_path, database_url):
    api_port, anvil_port, metrics_port = free_ports(3)
    done = run("dev", "--data-dir", str(tmp_path / "dev"), "--api-port", str(api_port), "--anvil-port",
               str(anvil_port), "--metrics-port", str(metrics_port), "--no-demo",
               VIP_ANVIL_BIN=str(tmp_path / "no-anvil-here"), DATABASE_URL=database_url)
    line = one_line_refusal(done, "dev")
    assert "VIP_ANVIL_BIN" in line and "npm" in line


@pytest.mark.e2e
async def test_keys_list_of_an_unknown_organisation_creates_nothing(database_url, engine):
    line = one_line_refusal(run("keys", "list", "--org", "acme-typo", DATABASE_URL=database_url), "keys list")
    assert "no organisation named 'acme-typo'" in line and "vip keys create --org acme-typo" in line
    async with engine.connect() as conn:
        named = select(organisations.c.id).where(organisations.c.name == "acme-typo")
        assert await conn.scalar(named) is None


@pytest.mark.e2e
def test_version():
    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"vip {package_version()}"


@pytest.mark.e2e
@pytest.mark.parametrize(("command", "shown"), [
    (["dev"], ["(default: 8080)", "(default: 8545)", "(default: 9464)", "(default: .vip-dev)"]),
    (["keys", "create"], ["(default: read,write)"]),
    (["time-travel"], ["(default: local)", "(default: 1)"]),
    (["webhooks", "events"], ["(default: 20)"]),
])
def test_help_shows_defaults(command, shown):
    done = run(*command, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse wraps lines
    for default in shown:
        assert default in text, (command, default)
    assert "(default: None)" not in text


@pytest.mark.e2e
def test_library_log_lines_use_the_same_structured_format():
    program = ("import logging; from vip.logging import configure_logging; configure_logging('json'); "
               "logging.getLogger('aiohttp.server').error('handler failed: %s', 'boom'); "
               "logging.getLogger('sqlalchemy.pool').info('not shown: below WARNING')")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent)
    [line] = done.stderr.strip().splitlines()
    record = json.loads(line)
    assert (record["event"], record["level"], record["logger"]) == ("handler failed: boom", "error",
                                                                    "aiohttp.server")
    assert "timestamp" in record


def test_every_option_of_every_command_says_what_it_is():
    """Every argument has a help text (so its default, when it has one, is shown beside it)."""
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction | argparse._VersionAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "vip")
    assert not missing, missing
