"""The OAuth client every configured platform shares: the signed `state`, the authorization address,
the code-for-token exchange and the paged pull of income records (whose values obey
`vip.connections.income_records`, as a lender's direct push does).

Records endpoint contract (one shape for every platform; an adapter per platform would plug in here):
`GET records_url[?cursor=<next_cursor>]` with `Authorization: Bearer <access token>` answers 200 with

    {"account": {"id": "<account id>", "holder": "<account holder reference>", "currency": "USDC"},
     "records": [{"date": "YYYY-MM-DD", "amount": "5000.00" | 5000.00, "currency": "USDC" (optional,
                  default the account's), "direction": "inbound" | "outbound",
                  "from_reference": "0x..." | "<reference>" (optional), "description": "..." (optional)}],
     "next_cursor": "<opaque>" | null}

Any other answer (a status other than 200, a time-out, a body that is not such a page, a page of another
account, a cursor that repeats, more pages or records than configured) fails the whole sync with
502 ERR_PLATFORM_SYNC_FAILED and nothing is stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import aiohttp
import structlog
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from yarl import URL

from vip.config import PlatformConfig
from vip.connections.income_records import (
    IncomeRecord,
    PulledAccount,
    Text,
    check_amount,
    check_currency,
    check_day,
    check_reference,
)
from vip.errors import ApiError, PlatformSyncFailed
from vip.formats import loads

log = structlog.get_logger(__name__)

STATE_TTL = timedelta(minutes=10)
STATE_RETENTION = timedelta(days=1)  # spent or expired states are kept this long, then pruned
CALLBACK_PATH = "/v1/connect/platform/callback"
MAX_PAGE_BYTES = 4 * 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024

_STATE = re.compile(r"^([A-Za-z0-9_-]{32})\.([0-9a-f]{64})$")

# --- errors -------------------------------------------------------------------------------------------------


class OAuthStateInvalid(ApiError):
    status, code = 400, "ERR_OAUTH_STATE_INVALID"


class OAuthDenied(ApiError):
    status, code = 400, "ERR_OAUTH_DENIED"


class OAuthCodeInvalid(ApiError):
    status, code = 400, "ERR_OAUTH_CODE_INVALID"


def sync_failed(platform: PlatformConfig, reason: str, **details: Any) -> PlatformSyncFailed:
    log.warning("platform sync failed", platform=platform.id, reason=reason, **details)
    return PlatformSyncFailed(f"current data could not be retrieved from {platform.id}: {reason}",
                              {"platform": platform.id, "reason": reason, **details})


# --- state --------------------------------------------------------------------------------------------------


def new_state_id() -> str:
    return secrets.token_urlsafe(24)  # 32 characters, 192 random bits


def _mac(secret: str, state_id: str) -> str:
    return hmac.new(secret.encode(), state_id.encode(), hashlib.sha256).hexdigest()


def sign_state(secret: str, state_id: str) -> str:
    """The `state` handed to the platform: `<id>.<hex HMAC-SHA256(secret, id)>`."""
    return f"{state_id}.{_mac(secret, state_id)}"


def state_id_of(secret: str, state: str) -> str | None:
    """The id inside a state this service signed; None for anything else (compared in constant time)."""
    match = _STATE.match(state)
    if match is None:
        return None
    state_id, mac = match.groups()
    return state_id if hmac.compare_digest(mac, _mac(secret, state_id)) else None


# --- authorization address ----------------------------------------------------------------------------------


def callback_url(public_base_url: str) -> str:
    return public_base_url.rstrip("/") + CALLBACK_PATH


def authorize_redirect(platform: PlatformConfig, state: str, redirect_uri: str) -> str:
    """The platform's authorization address with client_id, scope, state, redirect_uri and
    response_type=code (percent-encoded; a query the configured address already has is kept)."""
    parts = urlsplit(platform.authorize_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [("client_id", platform.client_id), ("scope", platform.scopes), ("state", state),
              ("redirect_uri", redirect_uri), ("response_type", "code")]
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote, safe="")))


# --- the platform's answers ---------------------------------------------------------------------------------


class _Lenient(BaseModel):
    # Platforms add fields over time; what we need is checked, the rest ignored.
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class _PageAccount(_Lenient):
    id: Text = Field(min_length=1, max_length=200)
    holder: Text = Field(min_length=1, max_length=200)
    currency: Annotated[str, AfterValidator(check_currency)] | None = None


class _PageRecord(_Lenient):
    date: Annotated[Any, AfterValidator(check_day)]
    amount: Annotated[Any, AfterValidator(lambda v: check_amount(v, allow_text=True))]
    currency: Annotated[str, AfterValidator(check_currency)] | None = None
    direction: Literal["inbound", "outbound"]
    from_reference: Annotated[Text, Field(max_length=200), AfterValidator(check_reference)] | None = None
    description: Annotated[Text, Field(max_length=500)] | None = None


class _Page(_Lenient):
    account: _PageAccount
    records: list[_PageRecord] = Field(max_length=10_000)
    next_cursor: Annotated[Text, Field(min_length=1, max_length=500)] | None = None


class _Token(_Lenient):
    access_token: Text = Field(min_length=1, max_length=4096)
    token_type: str = "bearer"
    refresh_token: Text | None = Field(default=None, min_length=1, max_length=4096)
    expires_in: int | None = Field(default=None, ge=0, le=10**9)


@dataclass(frozen=True)
class Grant:
    """What the token exchange gave: kept (sealed) so the records can be pulled again on a refresh."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_in: int | None = None  # seconds, as the platform said


async def _read_json(resp: aiohttp.ClientResponse, limit: int) -> Any:
    """The body as JSON (fractions as Decimal), refusing one larger than `limit` bytes."""
    body = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > limit:
            raise ValueError(f"answer larger than {limit} bytes")
    return loads(bytes(body))


def _problem(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return f"malformed answer: {where}: {first['msg'].removeprefix('Value error, ')}"
    if isinstance(exc, ValueError):
        return f"malformed answer: {exc}"
    return f"failed: {type(exc).__name__}"


# --- the exchange and the pull ------------------------------------------------------------------------------


async def _post_token(session: aiohttp.ClientSession, platform: PlatformConfig, form: dict[str, str],
                      what: str) -> tuple[int, Any, str | None]:
    """POST a grant to the platform's token endpoint: (HTTP status, the JSON answer or None, its OAuth
    `error` code or None). A failed connection or a time-out is 502 ERR_PLATFORM_SYNC_FAILED."""
    try:
        async with session.post(platform.token_url, data=form, allow_redirects=False,
                                headers={"Accept": "application/json"},
                                timeout=aiohttp.ClientTimeout(total=platform.timeout_s)) as resp:
            status = resp.status
            try:
                payload = await _read_json(resp, MAX_TOKEN_BYTES)
            except ValueError:
                payload = None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise sync_failed(platform, f"{what} {_problem(exc)}") from exc
    error = payload.get("error") if isinstance(payload, dict) else None
    return status, payload, error if isinstance(error, str) else None


def _grant_refused(status: int, error: str | None) -> bool:
    """The platform refused the grant itself (not our client credentials, not a throttle)."""
    return 400 <= status < 500 and status != 429 and error not in ("invalid_client", "unauthorized_client")


def _grant(platform: PlatformConfig, status: int, payload: Any, error: str | None, what: str) -> Grant:
    """The tokens of a token endpoint's answer that did not refuse the grant; anything but a 200 with a
    bearer token is 502 ERR_PLATFORM_SYNC_FAILED."""
    if status != 200:
        raise sync_failed(platform, f"{what} answered {status}", platform_error=(error or "")[:100])
    try:
        token = _Token.model_validate(payload)
    except ValidationError as exc:
        raise sync_failed(platform, f"{what} {_problem(exc)}") from exc
    if token.token_type.lower() != "bearer":
        raise sync_failed(platform, f"token type {token.token_type[:40]!r} is not bearer")
    return Grant(token.access_token, token.refresh_token, token.expires_in)


async def exchange_code(session: aiohttp.ClientSession, platform: PlatformConfig, code: str,
                        redirect_uri: str) -> Grant:
    """Trade the authorization code for an access token (RFC 6749 4.1.3, client secret in the body).

    A code the platform refuses is 400 ERR_OAUTH_CODE_INVALID; a platform that refuses our client
    credentials, throttles, fails, is slow or answers nonsense is 502 ERR_PLATFORM_SYNC_FAILED.
    """
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "client_id": platform.client_id, "client_secret": platform.client_secret.get_secret_value()}
    status, payload, error = await _post_token(session, platform, form, "token exchange")
    if _grant_refused(status, error):
        raise OAuthCodeInvalid(f"{platform.id} refused the authorization code; start the connection again",
                               {"platform": platform.id, "platform_error": (error or str(status))[:100]})
    return _grant(platform, status, payload, error, "token exchange")


def _record(platform: PlatformConfig, account: _PageAccount, item: _PageRecord, latest: date,
            where: str) -> IncomeRecord:
    currency = item.currency or account.currency
    if currency is None:
        raise sync_failed(platform, f"malformed answer: {where}.currency: missing (and no account currency)")
    if item.date > latest:
        raise sync_failed(platform, f"malformed answer: {where}.date: {item.date} is in the future")
    return IncomeRecord(item.date, item.amount, currency, item.direction, item.from_reference,
                        item.description)


async def pull_records(session: aiohttp.ClientSession, platform: PlatformConfig, token: str,
                       today: date) -> PulledAccount:
    """Every income record of the account the token opens, following `next_cursor` to the end.

    All or nothing: any failed or malformed page fails the pull (502 ERR_PLATFORM_SYNC_FAILED). Records
    dated more than one day after `today` (the service's date; one day of slack for platforms ahead of
    UTC) make the page malformed.
    """
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    timeout = aiohttp.ClientTimeout(total=platform.timeout_s)
    latest = today + timedelta(days=1)
    account: _PageAccount | None = None
    records: list[IncomeRecord] = []
    cursor: str | None = None
    seen_cursors: set[str] = set()
    for page_no in range(platform.max_pages):
        url = URL(platform.records_url)
        if cursor is not None:
            url = url.update_query(cursor=cursor)
        try:
            async with session.get(url, headers=headers, allow_redirects=False, timeout=timeout) as resp:
                if resp.status != 200:
                    raise sync_failed(platform, f"records page {page_no} answered {resp.status}",
                                      page=page_no, status=resp.status)
                page = _Page.model_validate(await _read_json(resp, MAX_PAGE_BYTES))
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            # ValidationError is a ValueError: a malformed page lands here too.
            raise sync_failed(platform, f"records page {page_no} {_problem(exc)}", page=page_no) from exc
        if account is None:
            account = page.account
        elif page.account.id != account.id:
            raise sync_failed(platform, f"records page {page_no} is of another account", page=page_no)
        for index, item in enumerate(page.records):
            records.append(_record(platform, account, item, latest, f"page {page_no} records.{index}"))
        if len(records) > platform.max_records:
            raise sync_failed(platform, f"more than {platform.max_records} records")
        cursor = page.next_cursor
        if cursor is None:
            return PulledAccount(account.id, account.holder, records)
        if cursor in seen_cursors:
            raise sync_failed(platform, f"records page {page_no} repeats a cursor", page=page_no)
        seen_cursors.add(cursor)
    raise sync_failed(platform, f"more than {platform.max_pages} pages of records")


async def fetch_account(session: aiohttp.ClientSession, platform: PlatformConfig, code: str,
                        redirect_uri: str, today: date) -> tuple[PulledAccount, Grant]:
    """Exchange the code, then pull every record; the whole sync is bounded by `sync_timeout_s`."""
    try:
        async with asyncio.timeout(platform.sync_timeout_s):
            grant = await exchange_code(session, platform, code, redirect_uri)
            return await pull_records(session, platform, grant.access_token, today), grant
    except TimeoutError as exc:
        raise sync_failed(platform, f"sync took longer than {platform.sync_timeout_s} s") from exc


class RefreshRefused(Exception):
    """The platform refused the refresh token (RFC 6749 5.2: invalid_grant and the like): the user's grant
    is gone, and only a new connection mends it."""

    def __init__(self, platform_error: str) -> None:
        super().__init__(platform_error)
        self.platform_error = platform_error


async def refresh_grant(session: aiohttp.ClientSession, platform: PlatformConfig,
                        refresh_token: str) -> Grant:
    """A new access token for a kept refresh token (RFC 6749 6, client secret in the body). The platform's
    refusal of the grant is RefreshRefused; its refusal of our client credentials, a throttle, a failure,
    a time-out or nonsense is 502 ERR_PLATFORM_SYNC_FAILED (the connection stays as it is)."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": platform.client_id,
            "client_secret": platform.client_secret.get_secret_value()}
    status, payload, error = await _post_token(session, platform, form, "token refresh")
    if _grant_refused(status, error):
        raise RefreshRefused((error or str(status))[:100])
    return _grant(platform, status, payload, error, "token refresh")


async def repull_account(session: aiohttp.ClientSession, platform: PlatformConfig, token: str,
                         today: date) -> PulledAccount:
    """Pull every record again with a kept access token, bounded by `sync_timeout_s` like a first sync.
    A token the platform no longer honours (401) fails like any other page: 502."""
    try:
        async with asyncio.timeout(platform.sync_timeout_s):
            return await pull_records(session, platform, token, today)
    except TimeoutError as exc:
        raise sync_failed(platform, f"sync took longer than {platform.sync_timeout_s} s") from exc
