"""API keys of the caller's organisation (scope `admin`): create, list, revoke."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field, field_validator

from vip.accounts import keys
from vip.api.context import ENGINE, KEY_CACHE, principal, requires
from vip.api.jsonio import iso, json_response
from vip.api.validation import Body, read_body

routes = web.RouteTableDef()


class CreateKey(Body):
    scopes: list[str] = Field(min_length=1, json_schema_extra={"items": {"enum": list(keys.SCOPES)}})
    description: str | None = Field(default=None, max_length=200)

    @field_validator("scopes")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return keys.validate_scopes(value)


def key_json(info: keys.KeyInfo) -> dict[str, Any]:
    return {"id": info.id, "prefix": info.prefix, "scopes": info.scopes, "description": info.description,
            "created_at": iso(info.created_at), "last_used_at": iso(info.last_used_at),
            "revoked_at": iso(info.revoked_at), "status": "revoked" if info.revoked_at else "active"}


@routes.post("/v1/api-keys")
@requires("admin")
async def create_key(request: web.Request) -> web.Response:
    body = await read_body(request, CreateKey)
    secret, info = await keys.issue_key(request.app[ENGINE], principal(request).organisation_id, body.scopes,
                                        body.description)
    return json_response({"api_key": {**key_json(info), "secret": secret}}, status=201)


@routes.get("/v1/api-keys")
@requires("admin")
async def list_keys(request: web.Request) -> web.Response:
    infos = await keys.organisation_keys(request.app[ENGINE], principal(request).organisation_id)
    return json_response({"api_keys": [key_json(i) for i in infos]})


@routes.delete("/v1/api-keys/{key_id}")
@requires("admin")
async def revoke_key(request: web.Request) -> web.Response:
    key_id = request.match_info["key_id"]
    info = await keys.revoke_organisation_key(request.app[ENGINE], principal(request).organisation_id, key_id)
    request.app[KEY_CACHE].forget_key(key_id)  # this process at once; the others on the revocation's NOTIFY
    return json_response({"api_key": key_json(info)})
