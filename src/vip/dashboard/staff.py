"""Staff members and their sessions: the dashboard's store.

Passwords are hashed with argon2id (argon2-cffi's defaults, RFC 9106's low-memory profile); hashing and
checking run in a worker thread, never on the event loop. A session's cookie carries 256 random bits; the
table keeps only their SHA-256 (a read of the database gives no usable session), with the session's CSRF
token. Times are the database's wall clock (never a test clock's chain time)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, cast, get_args

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Row, Select, delete, func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.ids import new_id
from vip.store.tables import organisations, staff_members, staff_sessions

Role = Literal["admin", "analyst", "operator"]
ROLES: tuple[Role, ...] = get_args(Role)
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 256  # argon2 hashes anything, but a megabyte "password" is an attack, not a secret
SESSION_IDLE = timedelta(minutes=30)
SESSION_ABSOLUTE = timedelta(hours=12)
# Sign-in attempts counted over the last SIGN_IN_WINDOW_MINUTES one-minute windows (rate_limit_windows).
SIGN_IN_WINDOW_MINUTES = 5
SIGN_IN_LIMIT_PER_EMAIL = 10
SIGN_IN_LIMIT_PER_CLIENT = 30
# The password page checks the current password: limited like sign-in, per member and per client address.
PASSWORD_LIMIT_PER_MEMBER = 10
PASSWORD_LIMIT_PER_CLIENT = 30

_hasher = PasswordHasher()


@functools.cache
def unknown_email_hash() -> str:
    """A hash no password matches, checked against when no member has the email, so that an unknown email
    costs what a known one does. Made once, by the dashboard's start-up (vip.dashboard.app), not at import:
    every `vip` command and every test process imports this module, few of them sign anyone in."""
    return _hasher.hash(secrets.token_urlsafe(24))


@dataclass(frozen=True)
class StaffIdentity:
    """Who is signed in: a member of one organisation with one role."""

    member_id: str
    organisation_id: str
    organisation_name: str
    email: str
    role: Role
    # Signed in with a password someone else chose (a first or a reset one): every page but the password
    # page sends the member there until it is replaced.
    must_change_password: bool = False


@dataclass(frozen=True)
class Session:
    staff: StaffIdentity
    csrf_token: str


class StaffError(ValueError):
    """A staff change refused, with a sentence saying why."""


def normalise_email(email: str) -> str:
    return email.strip().lower()


def check_new_member(email: str, password: str, role: str) -> None:
    """Raises StaffError saying what is wrong with a new member's details."""
    if "@" not in email or len(email) > 254 or any(c.isspace() for c in email):
        raise StaffError("the email must look like name@example.com")
    if role not in ROLES:
        raise StaffError(f"the role must be one of {', '.join(ROLES)}")
    check_password(password)


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise StaffError(f"the password must be at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise StaffError(f"the password may be at most {MAX_PASSWORD_LENGTH} characters")


async def hash_password(password: str) -> str:
    return await asyncio.to_thread(_hasher.hash, password)


async def _verify(password_hash: str, password: str) -> bool:
    def verify() -> bool:
        try:
            return _hasher.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(verify)


def _identity(row: Row[Any]) -> StaffIdentity:
    return StaffIdentity(row.id, row.organisation_id, row.organisation_name, row.email, cast(Role, row.role),
                         row.must_change_password)


def _members() -> Select[Any]:
    return (select(staff_members.c.id, staff_members.c.organisation_id, staff_members.c.email,
                   staff_members.c.role, staff_members.c.password_hash, staff_members.c.must_change_password,
                   organisations.c.name.label("organisation_name"))
            .join(organisations, organisations.c.id == staff_members.c.organisation_id))


async def add_member(conn: AsyncConnection, organisation_id: str, email: str, password: str,
                     role: str, *, must_change_password: bool = False) -> StaffIdentity:
    """A new member of the organisation; StaffError for bad details or an email already there. A password
    chosen for the member by someone else (`must_change_password`) must be replaced at first sign-in."""
    email = normalise_email(email)
    check_new_member(email, password, role)
    password_hash = await hash_password(password)
    try:
        async with conn.begin_nested():
            member_id = await conn.scalar(staff_members.insert().values(
                id=new_id("stf"), organisation_id=organisation_id, email=email,
                password_hash=password_hash, role=role, must_change_password=must_change_password,
            ).returning(staff_members.c.id))
    except IntegrityError:
        raise StaffError(f"{email} is already a member of this organisation") from None
    return _identity((await conn.execute(_members().where(staff_members.c.id == member_id))).one())


async def list_members(conn: AsyncConnection, organisation_id: str) -> list[StaffIdentity]:
    rows = await conn.execute(_members().where(staff_members.c.organisation_id == organisation_id)
                              .order_by(staff_members.c.email))
    return [_identity(r) for r in rows]


async def remove_member(conn: AsyncConnection, organisation_id: str, email: str) -> bool:
    """Remove the member (their sessions end with them); False when there is no such member."""
    removed = await conn.scalar(delete(staff_members).where(
        staff_members.c.organisation_id == organisation_id,
        staff_members.c.email == normalise_email(email)).returning(staff_members.c.id))
    return removed is not None


def new_password() -> str:
    """A first password an admin hands to a new member (128 random bits, 22 characters); the member
    replaces it on the password page."""
    return secrets.token_urlsafe(16)


async def load_member(conn: AsyncConnection, organisation_id: str, member_id: str, *,
                      lock: bool = False) -> StaffIdentity | None:
    """The organisation's member with this id (None for an unknown id or another organisation's)."""
    query = _members().where(staff_members.c.id == member_id,
                             staff_members.c.organisation_id == organisation_id)
    row = (await conn.execute(query.with_for_update(of=staff_members) if lock else query)).first()
    return _identity(row) if row is not None else None


async def _lock_admins(conn: AsyncConnection, organisation_id: str) -> list[str]:
    """The organisation's admins' ids, their rows locked: two admins demoting each other at the same
    instant cannot leave the organisation with none."""
    return list(await conn.scalars(select(staff_members.c.id).where(
        staff_members.c.organisation_id == organisation_id, staff_members.c.role == "admin")
        .order_by(staff_members.c.id).with_for_update()))


async def change_role(conn: AsyncConnection, organisation_id: str, member_id: str, role: str
                      ) -> tuple[StaffIdentity, StaffIdentity] | None:
    """Give the member another role: (before, after), None for no such member; StaffError when the role
    is unknown or the change would leave the organisation without an admin. The member's sessions carry
    the new role from their next page (a session reads the member's row at every request)."""
    if role not in ROLES:
        raise StaffError(f"the role must be one of {', '.join(ROLES)}")
    admins = await _lock_admins(conn, organisation_id)
    before = await load_member(conn, organisation_id, member_id, lock=True)
    if before is None:
        return None
    if before.role == "admin" and role != "admin" and admins == [member_id]:
        raise StaffError(f"{before.email} is the organisation's only admin: make another admin first")
    await conn.execute(update(staff_members).where(staff_members.c.id == member_id).values(role=role))
    after = await load_member(conn, organisation_id, member_id)
    assert after is not None
    return before, after


async def remove_member_by_id(conn: AsyncConnection, organisation_id: str, member_id: str
                              ) -> StaffIdentity | None:
    """Remove the member (their sessions end with them); None for no such member; StaffError for the
    organisation's only admin."""
    admins = await _lock_admins(conn, organisation_id)
    member = await load_member(conn, organisation_id, member_id, lock=True)
    if member is None:
        return None
    if admins == [member_id]:
        raise StaffError(f"{member.email} is the organisation's only admin: make another admin first")
    await conn.execute(delete(staff_members).where(staff_members.c.id == member_id))
    return member


async def change_password(conn: AsyncConnection, member: StaffIdentity, current: str, new: str,
                          keep_session_token: str) -> bool:
    """Replace the member's password when `current` is right (False otherwise; StaffError for a new one
    too short, too long or the same as the current one), and end every other session of theirs: whoever
    knew the old password is signed out. A password someone else chose is then the member's own."""
    check_password(new)
    password_hash = await conn.scalar(select(staff_members.c.password_hash)
                                      .where(staff_members.c.id == member.member_id).with_for_update())
    if password_hash is None or len(current) > MAX_PASSWORD_LENGTH or not await _verify(password_hash,
                                                                                        current):
        return False
    if new == current:
        raise StaffError("the new password must differ from the current one")
    await conn.execute(update(staff_members).where(staff_members.c.id == member.member_id)
                       .values(password_hash=await hash_password(new), must_change_password=False))
    await conn.execute(delete(staff_sessions).where(
        staff_sessions.c.member_id == member.member_id,
        staff_sessions.c.token_hash != _token_hash(keep_session_token)))
    return True


async def check_credentials(conn: AsyncConnection, organisation_name: str, email: str,
                            password: str) -> StaffIdentity | None:
    """The member with these credentials, or None (the same answer, in about the same time, for an unknown
    organisation, an unknown email and a wrong password)."""
    row = (await conn.execute(_members().where(organisations.c.name == organisation_name.strip(),
                                               staff_members.c.email == normalise_email(email)))).first()
    if len(password) > MAX_PASSWORD_LENGTH:
        return None
    if row is None:
        await _verify(await asyncio.to_thread(unknown_email_hash), password)
        return None
    return _identity(row) if await _verify(row.password_hash, password) else None


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def open_session(conn: AsyncConnection, member: StaffIdentity) -> tuple[str, str]:
    """A new session of the member: (the cookie's token, the session's CSRF token)."""
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    await conn.execute(staff_sessions.insert().values(
        token_hash=_token_hash(token), member_id=member.member_id, csrf_token=csrf,
        expires_at=func.now() + SESSION_ABSOLUTE))
    return token, csrf


async def find_session(conn: AsyncConnection, token: str) -> Session | None:
    """The live session of this cookie token, its idle time reset; None when unknown or expired."""
    found = (await conn.execute(update(staff_sessions).where(
        staff_sessions.c.token_hash == _token_hash(token),
        staff_sessions.c.expires_at > func.now(),
        staff_sessions.c.last_seen_at > func.now() - SESSION_IDLE,
    ).values(last_seen_at=func.now()).returning(staff_sessions.c.member_id, staff_sessions.c.csrf_token))
    ).first()
    if found is None:
        return None
    row = (await conn.execute(_members().where(staff_members.c.id == found.member_id))).one()
    return Session(_identity(row), found.csrf_token)


async def close_session(conn: AsyncConnection, token: str) -> None:
    await conn.execute(delete(staff_sessions).where(staff_sessions.c.token_hash == _token_hash(token)))


async def prune_sessions(conn: AsyncConnection) -> None:
    """Delete expired sessions (they no longer open anything; this only keeps the table small)."""
    await conn.execute(delete(staff_sessions).where(
        (staff_sessions.c.expires_at <= func.now())
        | (staff_sessions.c.last_seen_at <= func.now() - SESSION_IDLE)))


_COUNT_ATTEMPT = text("""
    WITH counted AS (
        INSERT INTO rate_limit_windows AS w (bucket, window_start, count)
        VALUES (:bucket, date_trunc('minute', now()), 1)
        ON CONFLICT (bucket, window_start) DO UPDATE SET count = w.count + 1
        RETURNING count
    )
    SELECT (SELECT count FROM counted) + coalesce((
        SELECT sum(count) FROM rate_limit_windows
        WHERE bucket = :bucket AND window_start < date_trunc('minute', now())
          AND window_start >= date_trunc('minute', now()) - make_interval(mins => :minutes - 1)), 0)
""")


async def _count_attempts(conn: AsyncConnection, buckets: tuple[tuple[str, int], ...]) -> bool:
    """Count one attempt in each bucket (the API's shared rate-limit table, over the last few minutes);
    False when any is over its limit."""
    allowed = True
    for bucket, limit in buckets:
        count = await conn.scalar(_COUNT_ATTEMPT, {"bucket": bucket, "minutes": SIGN_IN_WINDOW_MINUTES})
        allowed = allowed and count <= limit
    return allowed


async def count_sign_in_attempt(conn: AsyncConnection, organisation_name: str, email: str,
                                client: str) -> bool:
    """Count one sign-in attempt against the email within the organisation named (an email of one
    organisation's member is never locked out by attempts made on another's) and against the client's
    address; False when either is over its limit."""
    member = f"{organisation_name.strip()[:200]}\x1f{normalise_email(email)[:254]}"
    return await _count_attempts(conn, ((f"signin-email:{member}", SIGN_IN_LIMIT_PER_EMAIL),
                                        (f"signin-client:{client}", SIGN_IN_LIMIT_PER_CLIENT)))


async def count_password_attempt(conn: AsyncConnection, member: StaffIdentity, client: str) -> bool:
    """Count one try of the password page (it checks the current password) against the member and the
    client's address; False when either is over its limit."""
    return await _count_attempts(conn, ((f"password-member:{member.member_id}", PASSWORD_LIMIT_PER_MEMBER),
                                        (f"password-client:{client}", PASSWORD_LIMIT_PER_CLIENT)))


async def reset_password(conn: AsyncConnection, organisation_id: str, member_id: str
                         ) -> tuple[StaffIdentity, str] | None:
    """Give the member a new random password (returned, to be handed over once), to be replaced at their
    next sign-in; every session of theirs ends. None for no such member."""
    member = await load_member(conn, organisation_id, member_id, lock=True)
    if member is None:
        return None
    password = new_password()
    await conn.execute(update(staff_members).where(staff_members.c.id == member_id).values(
        password_hash=await hash_password(password), must_change_password=True))
    await conn.execute(delete(staff_sessions).where(staff_sessions.c.member_id == member_id))
    return member, password
