"""`vip orgs` and `vip staff`: an organisation's first dashboard admin is made on the command line, with
the password from standard input; a mistyped organisation is an error (never a new organisation) for
every command that acts on one."""

from __future__ import annotations

import os
import subprocess
import sys

from sqlalchemy import func, select

from vip.dashboard import staff
from vip.store.tables import organisations


def vip(*args: str, database_url: str, expect: int = 0, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


async def test_the_first_admin_is_added_listed_and_removed(database_url, engine):
    assert vip("orgs", "create", "acme", database_url=database_url).stdout.startswith("created org_")
    vip("orgs", "create", "acme", database_url=database_url, expect=1)
    added = vip("staff", "add", "--org", "acme", "--email", "Ada@Acme.test", "--role", "admin",
                "--password-stdin", database_url=database_url, stdin="a long enough password\n").stdout
    assert added.startswith("added ada@acme.test to acme as admin")
    async with engine.connect() as conn:
        signed = await staff.check_credentials(conn, "acme", "ada@acme.test", "a long enough password")
    assert signed is not None and signed.role == "admin"

    again = vip("staff", "add", "--org", "acme", "--email", "ada@acme.test", "--role", "analyst",
                "--password-stdin", database_url=database_url, stdin="another long password\n", expect=1)
    assert "already a member" in again.stderr
    short = vip("staff", "add", "--org", "acme", "--email", "bo@acme.test", "--role", "analyst",
                "--password-stdin", database_url=database_url, stdin="short\n", expect=2)
    assert "at least 12 characters" in short.stderr

    listing = vip("staff", "list", "--org", "acme", database_url=database_url).stdout
    assert "ada@acme.test" in listing and "admin" in listing and "password" not in listing
    assert vip("staff", "remove", "--org", "acme", "--email", "ada@acme.test",
               database_url=database_url).stdout.startswith("removed")
    vip("staff", "remove", "--org", "acme", "--email", "ada@acme.test", database_url=database_url, expect=1)
    assert vip("staff", "list", "--org", "acme", database_url=database_url).stdout == ""


async def test_a_mistyped_organisation_is_an_error_and_creates_nothing(database_url, engine):
    for command in (("staff", "add", "--org", "acme-typo", "--email", "a@b.test", "--role", "admin",
                     "--password-stdin"),
                    ("staff", "list", "--org", "acme-typo"),
                    ("webhooks", "list", "--org", "acme-typo"),
                    ("webhooks", "events", "--org", "acme-typo"),
                    ("funding-wallets", "list", "--org", "acme-typo"),
                    ("keys", "list", "--org", "acme-typo")):
        err = vip(*command, database_url=database_url, stdin="a long enough password\n", expect=2).stderr
        assert "no organisation named 'acme-typo'" in err, command
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(organisations)) == 0
