"""`vip staff ...`: the dashboard's staff members of an organisation: add (the first admin is made here),
list, remove. The password is asked for twice without echo, or read from standard input with
--password-stdin (scripts); it is never an argument (it would show in the process list and the shell's
history)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from vip.cli.dev_stack import database_url
from vip.cli.organisations import existing_organisation
from vip.config import Settings
from vip.dashboard import staff
from vip.store.engine import create_engine


def _password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"password for {args.email} (at least {staff.MIN_PASSWORD_LENGTH} characters): ")
    if getpass.getpass("again: ") != first:
        print("vip staff add: the passwords differ", file=sys.stderr)
        return None
    return first


async def run_staff_command(database_url: str, args: argparse.Namespace) -> int:
    """Exit 0 done, 1 refused (already a member, no such member), 2 bad input or no such organisation."""
    password = None
    if args.staff_command == "add":
        try:
            staff.check_new_member(staff.normalise_email(args.email), "x" * staff.MIN_PASSWORD_LENGTH,
                                   args.role)
            password = _password(args)
            if password is None:
                return 2
            staff.check_password(password)
        except staff.StaffError as exc:
            print(f"vip staff add: {exc}", file=sys.stderr)
            return 2
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            org = await existing_organisation(conn, args.org, f"staff {args.staff_command}")
            if org is None:
                return 2
            if args.staff_command == "add":
                assert password is not None
                try:
                    member = await staff.add_member(conn, org, args.email, password, args.role)
                except staff.StaffError as exc:
                    print(f"vip staff add: {exc}", file=sys.stderr)
                    return 1
                print(f"added {member.email} to {args.org} as {member.role} ({member.member_id})")
            elif args.staff_command == "list":
                for member in await staff.list_members(conn, org):
                    print(f"{member.member_id}  {member.email:<40} {member.role}")
            else:
                if not await staff.remove_member(conn, org, args.email):
                    print(f"vip staff remove: no member {args.email} in {args.org}", file=sys.stderr)
                    return 1
                print(f"removed {staff.normalise_email(args.email)} from {args.org}")
    finally:
        await engine.dispose()
    return 0


def cmd_staff(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(run_staff_command(database_url(settings), args))
