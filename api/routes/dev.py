"""Development helpers for integrators (scope `admin`): move a local chain's time, like a test clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field, WithJsonSchema, model_validator

from vip.api.context import CLOCK, ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.routes.test_clocks import refuse_outside_development
from vip.api.validation import NOT_BLANK, Body, read_body
from vip.chain import time_travel
from vip.chain.local_chain import ScriptFailed
from vip.chain.rpc import RpcError
from vip.errors import ERROR_TEXT_LIMIT, ChainUnavailable, Unprocessable, ValidationFailed
from vip.personas.builder import build_persona
from vip.personas.catalogue import PERSONAS, Persona

routes = web.RouteTableDef()
MOMENT = {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "integer", "minimum": 0},
                    {"type": "null"}]}


class TimeTravelRequest(Body):
    """Move a local network's time forward and mine blocks. Give `seconds` or `to_timestamp` (or
    neither, to only mine blocks)."""

    network: str = Field(min_length=1, pattern=NOT_BLANK, max_length=50,
                         description="A network marked local = true")
    seconds: int | None = Field(default=None, ge=0, le=time_travel.MAX_SECONDS,
                                description="Stamp the first new block this long after the head block")
    to_timestamp: Annotated[datetime | None, WithJsonSchema(MOMENT)] = Field(
        default=None, description="Stamp the first new block at this time (ISO 8601, or Unix seconds); "
                                  "it must be after the head block's")
    blocks: int = Field(default=1, ge=1, le=time_travel.MAX_BLOCKS, description="Blocks to mine")

    @model_validator(mode="after")
    def _one_target(self) -> TimeTravelRequest:
        if self.seconds is not None and self.to_timestamp is not None:
            raise ValueError("give seconds or to_timestamp, not both")
        return self

    def target_unix(self) -> int | None:
        if self.to_timestamp is None:
            return None
        moment = self.to_timestamp if self.to_timestamp.tzinfo else self.to_timestamp.replace(tzinfo=UTC)
        return int(moment.timestamp())


def head_json(head: time_travel.ChainHead) -> dict[str, Any]:
    return {"block_number": head.number, "timestamp": iso(head.time), "unix_timestamp": head.timestamp}


@routes.post("/v1/dev/time-travel")
@requires("admin")
async def travel(request: web.Request) -> web.Response:
    body = await read_body(request, TimeTravelRequest)
    settings = request.app[SETTINGS]
    try:
        network = time_travel.local_network(settings, body.network)
    except time_travel.UnknownNetwork as exc:
        names = ", ".join(sorted(settings.networks))
        raise ValidationFailed(f"unknown network {body.network}",
                               {"network": f"not a network of this service; one of: {names}"}) from exc
    except time_travel.TimeTravelRefused as exc:
        raise Unprocessable(f"time travel is only allowed on local development networks: {exc.reason}",
                            {"network": body.network}, code=exc.code) from exc
    try:
        moved = await time_travel.travel(network, settings.rpc, seconds=body.seconds,
                                         to_timestamp=body.target_unix(), blocks=body.blocks)
    except time_travel.NotForward as exc:
        head = iso(datetime.fromtimestamp(exc.head, UTC))
        raise ValidationFailed("to_timestamp must be after the head block's timestamp",
                               {"to_timestamp": f"not after the head block's timestamp {head}"}) from exc
    except RpcError as exc:
        raise ChainUnavailable("the network's RPC refused or did not answer: "
                               f"{exc.message[:ERROR_TEXT_LIMIT]}", {"network": network.name}) from exc
    return json_response({"network": network.name, "previous": head_json(moved.before),
                          "head": head_json(moved.after),
                          "advanced_seconds": moved.after.timestamp - moved.before.timestamp,
                          "blocks_mined": moved.after.number - moved.before.number})


class CreatePersona(Body):
    """A preset borrower, played on a local network: six months of on-chain money and the payroll
    platform's records, on a test clock of its own (see GET /v1/dev/personas for the catalogue)."""

    persona: str = Field(min_length=1, max_length=50, description="A persona's name (GET /v1/dev/personas)")
    network: str = Field(default="local", min_length=1, pattern=NOT_BLANK, max_length=50,
                         description="A network marked local = true")


def persona_json(persona: Persona) -> dict[str, Any]:
    return {"name": persona.name, "summary": persona.summary,
            "expected": {"status": persona.status, "periods_verified": persona.periods_verified,
                         "recommendation": persona.recommendation, "fraud_flags": sorted(persona.flags)}}


@routes.get("/v1/dev/personas")
@requires("read")
async def list_personas(request: web.Request) -> web.Response:
    refuse_outside_development(request.app[SETTINGS])
    return json_response({"personas": [persona_json(p) for p in PERSONAS.values()]})


@routes.post("/v1/dev/personas")
@requires("write")
async def create_persona(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    refuse_outside_development(settings)
    body = await read_body(request, CreatePersona)
    persona = PERSONAS.get(body.persona)
    if persona is None:
        raise ValidationFailed(f"unknown persona {body.persona}",
                               {"persona": f"one of: {', '.join(PERSONAS)}"})
    try:
        built = await build_persona(request.app[ENGINE], request.app[CLOCK], settings,
                                    principal(request).organisation_id, persona, body.network)
    except time_travel.UnknownNetwork as exc:
        raise ValidationFailed(f"unknown network {body.network}",
                               {"network": "not a network of this service"}) from exc
    except time_travel.TimeTravelRefused as exc:
        raise Unprocessable(f"personas are played on local development networks only: {exc.reason}",
                            {"network": body.network}, code=exc.code) from exc
    except RpcError as exc:
        raise ChainUnavailable("the network's RPC refused or did not answer: "
                               f"{exc.message[:ERROR_TEXT_LIMIT]}", {"network": body.network}) from exc
    except ScriptFailed as exc:
        raise ChainUnavailable(f"the local chain did not play the persona: {exc}",
                               {"network": body.network}) from exc
    return json_response({"persona": {**persona_json(persona), "user_id": built.user_id,
                                      "test_clock": built.test_clock, "frozen_time": iso(built.frozen_time),
                                      "wallets": built.wallets}}, status=201)
