"""The organisation's staff (admins): members with their roles; add one (a first password shown once, which
the member replaces), give one another role, remove one. The organisation always keeps an admin. And the
password page every member has. Each change is written to the audit log in its transaction."""

from __future__ import annotations

from aiohttp import web

from vip.api.context import ENGINE, REQUEST_ID
from vip.dashboard import audit
from vip.dashboard import staff as staff_store
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import COOKIE, requires, see_other
from vip.errors import NotFound

routes = web.RouteTableDef()


async def _staff_page(request: web.Request, *, status: int = 200, error: str | None = None,
                      email: str = "", role: str = "analyst") -> web.Response:
    async with request.app[ENGINE].connect() as conn:
        members = await staff_store.list_members(conn, request[STAFF].organisation_id)
    done = request.query.get("done")
    return render(request, "staff.html", status=status, members=members, roles=staff_store.ROLES,
                  error=error, email=email, chosen_role=role,
                  done=done if done in ("role", "removed") else None)


def _not_found(member_id: str) -> NotFound:
    return NotFound(f"no member {member_id} in this organisation", {"member": member_id})


@routes.get("/dashboard/staff")
@requires("admin")
async def staff_page(request: web.Request) -> web.StreamResponse:
    return await _staff_page(request)


@routes.post("/dashboard/staff")
@requires("admin")
async def add_member(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    email, role = str(form.get("email", "")).strip(), str(form.get("role", ""))
    password = staff_store.new_password()
    staff = request[STAFF]
    try:
        async with request.app[ENGINE].begin() as conn:
            member = await staff_store.add_member(conn, staff.organisation_id, email, password, role)
            await audit.record(conn, staff, "staff.added", member.member_id,
                               {"email": member.email, "role": member.role}, request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return await _staff_page(request, status=400, error=f"Not added: {exc}.", email=email[:254],
                                 role=role if role in staff_store.ROLES else "analyst")
    return render(request, "secret_shown.html", status=201, title="Member added",
                  what=f"{member.email} ({member.role}) signs in to {staff.organisation_name} with this "
                       f"first password.",
                  secret=password, back="/dashboard/staff", back_label="Back to staff",
                  note="Hand it over privately: it is shown only once, and the member should replace it "
                       "on the Password page after signing in.")


@routes.post("/dashboard/staff/{member_id}/role")
@requires("admin")
async def change_role(request: web.Request) -> web.StreamResponse:
    member_id = request.match_info["member_id"]
    role = str((await request.post()).get("role", ""))
    staff = request[STAFF]
    try:
        async with request.app[ENGINE].begin() as conn:
            changed = await staff_store.change_role(conn, staff.organisation_id, member_id, role)
            if changed is None:
                raise _not_found(member_id)
            before, after = changed
            await audit.record(conn, staff, "staff.role_changed", member_id,
                               {"email": after.email, "from": before.role, "to": after.role},
                               request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return await _staff_page(request, status=409, error=f"Role not changed: {exc}.")
    # An admin who gave up their own role may no longer open this page: home instead.
    return see_other("/dashboard/staff?done=role" if member_id != staff.member_id or role == "admin"
                     else "/dashboard")


@routes.post("/dashboard/staff/{member_id}/remove")
@requires("admin")
async def remove_member(request: web.Request) -> web.StreamResponse:
    member_id = request.match_info["member_id"]
    staff = request[STAFF]
    try:
        async with request.app[ENGINE].begin() as conn:
            removed = await staff_store.remove_member_by_id(conn, staff.organisation_id, member_id)
            if removed is None:
                raise _not_found(member_id)
            await audit.record(conn, staff, "staff.removed", member_id,
                               {"email": removed.email, "role": removed.role}, request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return await _staff_page(request, status=409, error=f"Not removed: {exc}.")
    # Removing oneself (while another admin stays) ends one's own session too.
    return see_other("/dashboard/sign-in" if member_id == staff.member_id
                     else "/dashboard/staff?done=removed")


@routes.get("/dashboard/password")
@requires()
async def password_page(request: web.Request) -> web.StreamResponse:
    return render(request, "password.html", error=None, changed=request.query.get("changed") == "1")


@routes.post("/dashboard/password")
@requires()
async def change_password(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    current, new, again = (str(form.get(name, "")) for name in ("current", "new", "again"))
    if new != again:
        return render(request, "password.html", status=400, changed=False,
                      error="The new password and its repetition differ.")
    staff = request[STAFF]
    try:
        async with request.app[ENGINE].begin() as conn:
            if not await staff_store.change_password(conn, staff, current, new, request.cookies[COOKIE]):
                return render(request, "password.html", status=400, changed=False,
                              error="The current password is not right.")
            await audit.record(conn, staff, "staff.password_changed", staff.member_id, {},
                               request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return render(request, "password.html", status=400, changed=False, error=f"Not changed: {exc}.")
    return see_other("/dashboard/password?changed=1")
