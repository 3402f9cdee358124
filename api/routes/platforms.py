"""Platform connections: by OAuth (GET /v1/connect/platform/authorize, then the platform sends the user's
browser to GET /v1/connect/platform/callback) or pushed by the integrating platform itself
(POST /v1/connect/platform/direct). A new connection answers 201, connecting an account already
connected answers 200 (vip.connections.platform_connect has the rules).
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

from vip.api.context import CLOCK, ENGINE, HTTP, SETTINGS, principal, public, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import NOT_BLANK, SPACE, Body, Query, read_body, read_query
from vip.config import PLATFORM_ID
from vip.connections import platform_connect
from vip.connections.income_records import (
    IncomeRecord,
    check_amount,
    check_currency,
    check_day,
    check_reference,
)
from vip.connections.platform_oauth import (
    CALLBACK_PATH,
    OAuthStateInvalid,
)
from vip.connections.resource import connection_json
from vip.errors import ValidationFailed

__all__ = ["AuthorizeQuery", "DirectPlatformConnection", "routes"]

routes = web.RouteTableDef()

MAX_RECORDS_PER_PUSH = 5000

# --- request models -----------------------------------------------------------------------------------------

Day = Annotated[dt.date, PlainValidator(check_day), WithJsonSchema({"type": "string", "format": "date"})]
Amount = Annotated[Any, PlainValidator(check_amount), WithJsonSchema({
    "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1000000000000000, "multipleOf": 0.000001,
    "description": "Exact decimal with at most 6 decimal places, as a JSON number (not a string)"})]
Currency = Annotated[str, Field(min_length=2, max_length=10,
                                 pattern=rf"^{SPACE}*[A-Za-z][A-Za-z0-9]{{1,9}}{SPACE}*$",
                                 description="A currency code: a letter, then 1 to 9 letters or digits "
                                             "(e.g. USD, USDC); stored upper-case"),
                     AfterValidator(check_currency)]
Reference = Annotated[str, Field(min_length=1, pattern=NOT_BLANK, max_length=200),
                      AfterValidator(check_reference)]
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

    account_holder: str = Field(min_length=1, pattern=NOT_BLANK, max_length=200)
    currency: Currency
    transaction_history: list[DirectRecord] = Field(max_length=MAX_RECORDS_PER_PUSH)


class DirectPlatformConnection(Body):
    """Body of POST /v1/connect/platform/direct."""

    user_id: str = Field(min_length=1, pattern=NOT_BLANK, max_length=100)
    platform: str = Field(pattern=PLATFORM_ID.pattern, description="Lowercase platform identifier")
    source_type: SourceType
    account_id: str = Field(min_length=1, pattern=NOT_BLANK, max_length=200)
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


# --- OAuth --------------------------------------------------------------------------------------------------


@routes.get("/v1/connect/platform/authorize")
@requires("write")
async def authorize(request: web.Request) -> web.Response:
    """A single-use, 10-minute `state` bound to the user and the platform, and the platform's
    authorization address to send the user to."""
    query = read_query(request, AuthorizeQuery)
    authorization = await platform_connect.start_authorization(
        request.app[ENGINE], request.app[CLOCK], request.app[SETTINGS], principal(request).organisation_id,
        query.platform, query.user_id)
    return json_response({"redirect_url": authorization.redirect_url,
                          "expires_at": iso(authorization.expires_at)})


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
    row, created = await platform_connect.complete_authorization(
        request.app[ENGINE], request.app[CLOCK], request.app[HTTP], request.app[SETTINGS],
        state=query.state, code=query.code, error=query.error)
    return json_response({"connection": connection_json(row)}, status=201 if created else 200)


# --- direct push --------------------------------------------------------------------------------------------


@routes.post("/v1/connect/platform/direct")
@requires("write")
async def direct(request: web.Request) -> web.Response:
    """The integrating platform pushes an account and its whole history; a push replaces the history."""
    body = await read_body(request, DirectPlatformConnection)
    records = [IncomeRecord(item.date, item.amount, body.data.currency, item.direction, item.from_reference,
                            item.description) for item in body.data.transaction_history]
    push = platform_connect.DirectPush(user_id=body.user_id, platform=body.platform,
                                       source_type=body.source_type, account_id=body.account_id,
                                       holder=body.data.account_holder, records=records)
    app = request.app
    row, created = await platform_connect.push_direct(app[ENGINE], app[CLOCK], app[SETTINGS],
                                                      principal(request).organisation_id, push)
    return json_response({"connection": connection_json(row)}, status=201 if created else 200)
