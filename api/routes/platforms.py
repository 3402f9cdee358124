"""Platform connections: by OAuth (GET /v1/connect/platform/authorize, then the platform sends the user's
browser to GET /v1/connect/platform/callback) or pushed by the integrating platform itself
(POST /v1/connect/platform/direct).

Rules shared by both ways in:
- One active connection per (user, platform, account id) (`uq_connections_active_account`). Connecting the
  same account again reuses it: its records are replaced (delete + insert, never duplicated), its account
  holder and source type refreshed, `last_synced_at` set; the answer is 200 and no event is fired.
- A new connection answers 201 and fires `connection.platform.created` with the connection as
  `data.object`, in the same transaction as the connection and its records.
- An OAuth connection keeps its tokens, sealed (`platform_tokens`), for the re-pull of
  GET /v1/vip-report?refresh=true (api/platform_refresh.py), which replaces the records the same way.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.accounts.users import load_user
from vip.api.context import CLOCK, ENGINE, HTTP, SETTINGS, principal, public, requires
from vip.api.jsonio import iso, json_response
from vip.api.serializers import connection_json
from vip.api.validation import Body, Query, read_body, read_query
from vip.connections import platform_tokens
from vip.connections.platform_oauth import (
    CALLBACK_PATH,
    PLATFORMS,
    STATE_RETENTION,
    STATE_TTL,
    IncomeRecord,
    OAuthDenied,
    OAuthStateInvalid,
    authorize_redirect,
    callback_url,
    check_amount,
    check_currency,
    check_day,
    check_reference,
    fetch_account,
    new_state_id,
    platform_registry,
    sign_state,
    state_id_of,
    sync_failed,
)
from vip.errors import Conflict, ValidationFailed
from vip.ids import new_id
from vip.platforms import PLATFORM_ID
from vip.store.outbox import record_event
from vip.store.tables import connections, income_records, oauth_states
from vip.token_cipher import TokenCipher

__all__ = ["PLATFORMS", "AuthorizeQuery", "DirectPlatformConnection", "routes"]

routes = web.RouteTableDef()

MAX_RECORDS_PER_PUSH = 5000
EVENT_CREATED = "connection.platform.created"

# --- request models -----------------------------------------------------------------------------------------

Day = Annotated[dt.date, PlainValidator(check_day), WithJsonSchema({"type": "string", "format": "date"})]
Amount = Annotated[Any, PlainValidator(check_amount), WithJsonSchema({
    "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1000000000000000,
    "description": "Exact decimal with at most 6 decimal places, as a JSON number (not a string)"})]
Currency = Annotated[str, Field(min_length=2, max_length=10), AfterValidator(check_currency)]
Reference = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(check_reference)]
SourceType = Literal["payroll", "neobank_account", "exchange_account", "payment_platform", "digital_wallet"]


class DirectRecord(BaseModel):
    """One item of `data.transaction_history`."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    date: Day = Field(description="YYYY-MM-DD, not after the service's current date (UTC)")
    amount: Amount
    direction: Literal["inbound", "outbound"]
    from_reference: Reference | None = Field(
        default=None, validate_default=True,
        description="Origin: a 0x address (stored lower-case) or another reference; required for inbound")
    description: str | None = Field(default=None, max_length=500)

    @field_validator("from_reference")
    @classmethod
    def _origin_of_inbound(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("direction") == "inbound":
            raise ValueError("required for inbound records (the origin the verification checks)")
        return value


class DirectData(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    account_holder: str = Field(min_length=1, max_length=200)
    currency: Currency
    transaction_history: list[DirectRecord] = Field(max_length=MAX_RECORDS_PER_PUSH)


class DirectPlatformConnection(Body):
    """Body of POST /v1/connect/platform/direct."""

    user_id: str = Field(min_length=1, max_length=100)
    platform: str = Field(pattern=PLATFORM_ID.pattern, description="Lowercase platform identifier")
    source_type: SourceType
    account_id: str = Field(min_length=1, max_length=200)
    data: DirectData


class AuthorizeQuery(Query):
    platform: str = Field(min_length=1, max_length=40)
    user_id: str = Field(min_length=1, max_length=100)


class CallbackQuery(BaseModel):
    # Platforms may add parameters (iss, scope, session_state, ...): ignored.
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    state: str | None = Field(default=None, max_length=200)
    code: str | None = Field(default=None, max_length=4096)
    error: str | None = Field(default=None, max_length=200)
    error_description: str | None = Field(default=None, max_length=1000)


# --- storage ------------------------------------------------------------------------------------------------


async def store_platform_connection(
    conn: AsyncConnection, *, organisation_id: str, user_id: str, provider: str, source_type: str,
    account_id: str, holder: str, records: list[IncomeRecord], now: dt.datetime,
) -> tuple[Any, bool]:
    """Create the active connection of (user, provider, account id), or reuse it, and make `records` its
    records (replacing the old ones); in the caller's transaction. Returns (row, created)."""
    row = (await conn.execute(pg_insert(connections).values(
        id=new_id("con"), organisation_id=organisation_id, user_id=user_id, type="platform",
        provider=provider, identifier=holder, source_type=source_type, account_id=account_id,
        status="active", created_at=now, last_synced_at=now,
    ).on_conflict_do_nothing(
        index_elements=["user_id", "provider", "account_id"],
        index_where=text("type = 'platform' AND status = 'active'"),
    ).returning(*connections.c))).first()
    created = row is not None
    if not created:
        # The UPDATE locks the row: a concurrent sync of the same account waits for this one.
        row = (await conn.execute(update(connections).where(
            connections.c.user_id == user_id, connections.c.provider == provider,
            connections.c.account_id == account_id, connections.c.type == "platform",
            connections.c.status == "active",
        ).values(identifier=holder, source_type=source_type, last_synced_at=now)
            .returning(*connections.c))).first()
        if row is None:  # revoked between the two statements
            raise Conflict("the connection changed while it was being synced; retry",
                           {"account_id": account_id}, code="ERR_CONNECTION_CHANGED")
    await replace_income_records(conn, row.id, records, existing=not created)
    if created:
        await record_event(conn, EVENT_CREATED, connection_json(row), created_at=now,
                           organisation_id=organisation_id)
    return row, created


async def replace_income_records(conn: AsyncConnection, connection_id: str, records: list[IncomeRecord], *,
                                 existing: bool = True) -> None:
    """Make `records` the connection's records (delete + insert: never duplicated)."""
    if existing:
        await conn.execute(delete(income_records).where(income_records.c.connection_id == connection_id))
    if records:
        await conn.execute(income_records.insert(), [r.row(connection_id) for r in records])


async def resync_platform_connection(conn: AsyncConnection, *, connection_id: str, holder: str,
                                     records: list[IncomeRecord], now: dt.datetime):
    """A re-pull of an existing connection (GET /v1/vip-report?refresh=true): as a reconnection of the
    same account, but never creating one. None when the connection is no longer active (revoked while it
    was being pulled: its records are no one's input any more)."""
    row = (await conn.execute(update(connections).where(
        connections.c.id == connection_id, connections.c.type == "platform", connections.c.status == "active",
    ).values(identifier=holder, last_synced_at=now).returning(*connections.c))).first()
    if row is not None:
        await replace_income_records(conn, row.id, records)
    return row


def _today(now: dt.datetime) -> dt.date:
    return now.astimezone(dt.UTC).date()


# --- OAuth --------------------------------------------------------------------------------------------------


@routes.get("/v1/connect/platform/authorize")
@requires("write")
async def authorize(request: web.Request) -> web.Response:
    """A single-use, 10-minute `state` bound to the user and the platform, and the platform's
    authorization address to send the user to."""
    query = read_query(request, AuthorizeQuery)
    registry = platform_registry(request.app)
    platform = registry.get(query.platform)
    if platform is None:
        known = sorted(registry)
        raise ValidationFailed(f"unknown platform {query.platform}", {
            "platform": f"not a supported platform; one of: {', '.join(known)}",
            "supported_platforms": known})
    settings = request.app[SETTINGS]
    org = principal(request).organisation_id
    now = await request.app[CLOCK].now()
    state_id = new_state_id()
    async with request.app[ENGINE].begin() as conn:
        await load_user(conn, org, query.user_id)
        await conn.execute(delete(oauth_states).where(oauth_states.c.user_id == query.user_id,
                                                      oauth_states.c.expires_at < now - STATE_RETENTION))
        await conn.execute(oauth_states.insert().values(
            id=state_id, organisation_id=org, user_id=query.user_id, platform=platform.id,
            expires_at=now + STATE_TTL))
    state = sign_state(settings.api.state_secret, state_id)
    redirect_url = authorize_redirect(platform, state, callback_url(settings.api.public_base_url))
    return json_response({"redirect_url": redirect_url, "expires_at": iso(now + STATE_TTL)})


async def _spend_state(request: web.Request, state: str | None, now: dt.datetime):
    """The state's row, marked used (committed before the platform is called, so a state is spent even
    when the sync fails). Anything else is 400 ERR_OAUTH_STATE_INVALID."""
    if not state:
        raise OAuthStateInvalid("the state parameter is missing", {"state": "missing"})
    state_id = state_id_of(request.app[SETTINGS].api.state_secret, state)
    if state_id is None:
        raise OAuthStateInvalid("the state was not issued by this service", {"state": "bad signature"})
    async with request.app[ENGINE].begin() as conn:
        row = (await conn.execute(select(oauth_states).where(oauth_states.c.id == state_id)
                                  .with_for_update())).first()
        if row is None:
            raise OAuthStateInvalid("the state is unknown; start the connection again", {"state": "unknown"})
        if row.used_at is not None:
            raise OAuthStateInvalid("the state was already used; start the connection again",
                                    {"state": "already used"})
        if row.expires_at <= now:
            raise OAuthStateInvalid("the state has expired; start the connection again",
                                    {"state": "expired", "expired_at": iso(row.expires_at)})
        await conn.execute(update(oauth_states).where(oauth_states.c.id == state_id).values(used_at=now))
    return row


@routes.get(CALLBACK_PATH)
@public
async def callback(request: web.Request) -> web.Response:
    """Where the platform sends the user's browser back: check and spend the state, exchange the code,
    pull every record, store the connection (201, or 200 for an account already connected)."""
    query = read_query(request, CallbackQuery)
    if query.error is None and not query.code:
        if not query.state:
            raise OAuthStateInvalid("the state parameter is missing", {"state": "missing"})
        raise ValidationFailed("the code parameter is missing", {"code": "required"})
    now = await request.app[CLOCK].now()
    state = await _spend_state(request, query.state, now)
    platform = platform_registry(request.app).get(state.platform)
    if platform is None:
        raise OAuthStateInvalid("the state's platform is no longer offered", {"state": "unknown platform"})
    if query.error is not None:
        if query.error == "access_denied":
            raise OAuthDenied("the user declined to share the data", {"platform": platform.id})
        raise sync_failed(platform, "authorization failed", platform_error=query.error[:100])
    settings = request.app[SETTINGS]
    pulled, grant = await fetch_account(request.app[HTTP], platform, query.code or "",
                                        callback_url(settings.api.public_base_url), _today(now))
    synced_at = await request.app[CLOCK].now()  # the pull may have taken a while
    expires_at = synced_at + dt.timedelta(seconds=grant.expires_in) if grant.expires_in is not None else None
    async with request.app[ENGINE].begin() as conn:
        row, created = await store_platform_connection(
            conn, organisation_id=state.organisation_id, user_id=state.user_id, provider=platform.id,
            source_type=platform.source_type, account_id=pulled.account_id, holder=pulled.holder,
            records=pulled.records, now=synced_at)
        # Kept for re-pulls on refresh (sealed; see vip/store/platform_tokens.py).
        await platform_tokens.save(conn, TokenCipher.from_text(settings.api.token_key.get_secret_value()),
                                   connection_id=row.id, access_token=grant.access_token,
                                   refresh_token=grant.refresh_token, expires_at=expires_at, now=synced_at)
    return json_response({"connection": connection_json(row)}, status=201 if created else 200)


# --- direct push --------------------------------------------------------------------------------------------


@routes.post("/v1/connect/platform/direct")
@requires("write")
async def direct(request: web.Request) -> web.Response:
    """The integrating platform pushes an account and its whole history; a push replaces the history."""
    body = await read_body(request, DirectPlatformConnection)
    configured = platform_registry(request.app).get(body.platform)
    if configured is not None and configured.source_type != body.source_type:
        raise ValidationFailed(f"{body.platform} is a {configured.source_type} platform",
                               {"source_type": f"must be {configured.source_type} for {body.platform}"})
    now = await request.app[CLOCK].now()
    today = _today(now)
    future = {f"data.transaction_history.{i}.date": f"is after the service's current date ({today})"
              for i, item in enumerate(body.data.transaction_history) if item.date > today}
    if future:
        raise ValidationFailed("invalid body: records dated in the future", dict(list(future.items())[:50]))
    records = [IncomeRecord(item.date, item.amount, body.data.currency, item.direction, item.from_reference,
                            item.description) for item in body.data.transaction_history]
    org = principal(request).organisation_id
    async with request.app[ENGINE].begin() as conn:
        await load_user(conn, org, body.user_id)
        row, created = await store_platform_connection(
            conn, organisation_id=org, user_id=body.user_id, provider=body.platform,
            source_type=body.source_type, account_id=body.account_id, holder=body.data.account_holder,
            records=records, now=now)
    return json_response({"connection": connection_json(row)}, status=201 if created else 200)
