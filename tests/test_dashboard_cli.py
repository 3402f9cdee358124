"""`vip orgs` and `vip staff`: an organisation's first dashboard admin is made on the command line, with
the password from standard input; a mistyped organisation is an error (never a new organisation) for
every command that acts on one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from vip.dashboard import staff
from vip.devstack.dev import DEV_ADMIN_EMAIL, DEV_ORGANISATION, dev_dashboard_admin
from vip.store.engine import create_engine
from vip.store.tables import organisations


def vip(*args: str, database_url: str, expect: int = 0, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("VIP_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "vip.cli", *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)
    assert done.returncode == expect, (done.stdout, done.stderr)
    return done


@pytest.mark.e2e
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


@pytest.mark.e2e
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


def test_vip_dev_keeps_one_dev_sign_in_for_the_demo_organisation(database_url, tmp_path):
    """`vip dev`'s dashboard admin: made once with a random password, kept (0600) in the data directory
    and reused while it still signs in; made again when the saved one no longer does."""
    saved = tmp_path / "dev-dashboard-password"
    first = dev_dashboard_admin(database_url, saved)
    assert len(first) >= staff.MIN_PASSWORD_LENGTH and saved.stat().st_mode & 0o777 == 0o600
    assert dev_dashboard_admin(database_url, saved) == first
    saved.write_text("not the password any more\n")
    second = dev_dashboard_admin(database_url, saved)
    assert second != first and saved.read_text().strip() == second

    async def signs_in(password: str) -> bool:
        engine = create_engine(database_url, pool_size=1)
        try:
            async with engine.connect() as conn:
                return await staff.check_credentials(conn, DEV_ORGANISATION, DEV_ADMIN_EMAIL,
                                                     password) is not None
        finally:
            await engine.dispose()

    assert asyncio.run(signs_in(second)) and not asyncio.run(signs_in(first))
