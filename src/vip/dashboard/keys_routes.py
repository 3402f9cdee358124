"""API keys (admins): the organisation's keys with their scopes and use; create one (its secret shown once,
on the answer to the form); revoke one. Each change is written to the audit log in its transaction."""

from __future__ import annotations

from aiohttp import web

from vip.accounts import keys
from vip.api.context import ENGINE, REQUEST_ID
from vip.dashboard import audit
from vip.dashboard.confirm import confirm_page, confirmed
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import requires, see_other
from vip.errors import NotFound

routes = web.RouteTableDef()
MAX_DESCRIPTION = 200


async def _keys_page(request: web.Request, *, status: int = 200, error: str | None = None,
                     description: str = "", scopes: list[str] | None = None) -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        listed = await keys.list_keys(conn, request[STAFF].organisation_id)
    listed.sort(key=lambda k: (k.revoked_at is not None, k.created_at))  # active keys first
    # The notice names a revoked key of the organisation's only: a crafted link cannot make it say more.
    revoked = next((k.id for k in listed if k.revoked_at and k.id == request.query.get("revoked")), None)
    return render(request, "keys.html", status=status, keys=listed, all_scopes=keys.SCOPES, error=error,
                  description=description, chosen=scopes if scopes is not None else ["read"],
                  revoked=revoked)


@routes.get("/dashboard/keys")
@requires("admin")
async def keys_page(request: web.Request) -> web.StreamResponse:
    return await _keys_page(request)


@routes.post("/dashboard/keys")
@requires("admin")
async def create_key(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    scopes = [str(s) for s in form.getall("scopes", [])]
    description = str(form.get("description", "")).strip()
    try:
        scopes = keys.validate_scopes(scopes)
    except ValueError:
        return await _keys_page(request, status=400, error="Choose at least one scope.",
                                description=description, scopes=scopes)
    if len(description) > MAX_DESCRIPTION:
        return await _keys_page(request, status=400, description=description[:MAX_DESCRIPTION], scopes=scopes,
                                error=f"The description may be at most {MAX_DESCRIPTION} characters.")
    staff = request[STAFF]
    async with request.app[ENGINE].begin() as conn:
        secret, info = await keys.create_key(conn, staff.organisation_id, scopes, description or None)
        await audit.record(conn, staff, "key.created", info.id,
                           {"scopes": info.scopes, "prefix": info.prefix, "description": info.description},
                           request.get(REQUEST_ID))
    return render(request, "secret_shown.html", status=201, title="API key created",
                  what=f"API key {info.prefix}… ({', '.join(info.scopes)})",
                  secret=secret, back="/dashboard/keys", back_label="Back to API keys",
                  note="Copy the key now: it is shown only once. Only a hash of it is kept.")


@routes.post("/dashboard/keys/{key_id}/revoke")
@requires("admin")
async def revoke_key(request: web.Request) -> web.StreamResponse:
    staff, key_id = request[STAFF], request.match_info["key_id"]
    if not confirmed(await request.post()):
        async with request.app[ENGINE].connect() as conn:
            listed = await keys.list_keys(conn, staff.organisation_id)
        key = next((k for k in listed if k.id == key_id and k.revoked_at is None), None)
        if key is None:
            raise NotFound(f"There is no active API key {key_id} in {staff.organisation_name}.")
        return confirm_page(
            request, title="Revoke this API key?", button="Revoke the key", back="/dashboard/keys",
            question=f"Revoke the API key {key.prefix}… ({key.description or 'no description'}; "
                     f"{', '.join(key.scopes)})?",
            consequences=["Every request made with it is refused from now on, in every API process.",
                          "It cannot be turned back on: whoever uses it needs a new key."])
    async with request.app[ENGINE].begin() as conn:
        info = await keys.revoke_key(conn, staff.organisation_id, key_id)
        if info is None:
            raise NotFound(f"There is no API key {key_id} in {staff.organisation_name}.")
        await audit.record(conn, staff, "key.revoked", info.id, {"prefix": info.prefix},
                           request.get(REQUEST_ID))
    return see_other(f"/dashboard/keys?revoked={info.id}")
