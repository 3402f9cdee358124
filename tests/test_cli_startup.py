"""`vip` parses its arguments without importing any subcommand's body: `vip webhooks list` does not load the
API application, web3 or Alembic, `vip --help` loads none of them (vip.cli.parser). Each subcommand's
`Command` names a function that exists, and the values the parser writes out are their modules' own."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from vip.chain import deployment
from vip.cli import parser as cli_parser
from vip.cli.parser import Command, build_parser
from vip.dashboard import staff
from vip.devstack.provider import PROFILES
from vip.webhooks import events

# What a subcommand's body brings, and parsing must not: the API application and its OpenAPI document,
# web3 and eth_account, Alembic, the daemons, `vip dev`, the dashboard's password hashing.
HEAVY = ("vip.api.app", "vip.api.openapi", "web3", "eth_account", "alembic", "vip.daemon", "vip.devstack.dev",
         "vip.dashboard.staff", "argon2")


def _commands(parser: argparse.ArgumentParser, path: str) -> dict[str, Command]:
    found = {path: parser.get_default("func")} if parser.get_default("func") else {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found |= _commands(child, f"{path} {name}")
    return found


def test_every_subcommand_names_a_function_that_exists():
    commands = _commands(build_parser(), "vip")
    assert {path.split()[1] for path in commands} == {
        "dev", "index", "serve", "migrate", "contracts", "revision", "status", "keys", "orgs", "staff",
        "webhooks", "funding-wallets", "sign-in-domains", "listen", "trigger", "secrets", "watch",
        "time-travel"}
    for path, command in commands.items():
        assert isinstance(command, Command), path
        assert callable(command.resolve()), path


def test_the_values_the_parser_writes_out_are_their_modules_own():
    assert cli_parser.DEFAULT_SALT == deployment.DEFAULT_SALT
    assert cli_parser.ROLES == staff.ROLES
    assert cli_parser.DELIVERY_STATUSES == events.DELIVERY_STATUSES
    assert tuple(sorted(PROFILES)) == cli_parser.PROVIDERS


@pytest.mark.e2e
@pytest.mark.parametrize("argv", [["--help"], ["webhooks", "list", "--org", "acme"],
                                  ["keys", "list", "--org", "acme"], ["orgs", "list"]])
def test_parsing_a_command_line_imports_no_subcommand_body(argv):
    code = ("import json, sys\nfrom vip.cli import build_parser\n"
            f"try:\n    build_parser().parse_args({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.e2e
def test_a_database_command_imports_neither_the_api_nor_web3():
    """`vip webhooks list`'s body needs the database and the webhook store, not the API or a chain."""
    code = ("import json, sys\nimport vip.cli.webhooks, vip.cli.organisations, vip.cli.keys\n"
            "print(json.dumps([m for m in ('vip.api.app', 'vip.api.openapi', 'web3', 'eth_account', "
            "'vip.daemon', 'vip.devstack.dev') if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
