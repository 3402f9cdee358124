"""The organisation's staff (admins): members with their roles; add one (a first password shown once, which
the member replaces), give one another role, remove one. The organisation always keeps an admin. And the
password page every member has. Each change is written to the audit log in its transaction."""

from __future__ import annotations

from aiohttp import web

from vip.api.context import ENGINE, REQUEST_ID
from vip.api.ratelimit import request_client
from vip.dashboard import audit
from vip.dashboard import staff as staff_store
from vip.dashboard.confirm import confirm_page, confirmed
from vip.dashboard.render import STAFF, render
from vip.dashboard.session import COOKIE, PASSWORD_PATH, requires, safe_next, see_other
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


async def _member(request: web.Request, member_id: str) -> staff_store.StaffIdentity:
    async with request.app[ENGINE].connect() as conn:
        member = await staff_store.load_member(conn, request[STAFF].organisation_id, member_id)
    if member is None:
        raise _not_found(member_id)
    return member


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
            member = await staff_store.add_member(conn, staff.organisation_id, email, password, role,
                                                  must_change_password=True)
            await audit.record(conn, staff, "staff.added", member.member_id,
                               {"email": member.email, "role": member.role}, request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return await _staff_page(request, status=400, error=f"Not added: {exc}.", email=email[:254],
                                 role=role if role in staff_store.ROLES else "analyst")
    return render(request, "secret_shown.html", status=201, title="Member added",
                  what=f"{member.email} ({member.role}) signs in to {staff.organisation_name} with this "
                       f"first password.",
                  secret=password, back="/dashboard/staff", back_label="Back to staff",
                  note="Hand it over privately: it is shown only once, and the member must replace it "
                       "when they first sign in.")


@routes.post("/dashboard/staff/{member_id}/role")
@requires("admin")
async def change_role(request: web.Request) -> web.StreamResponse:
    member_id = request.match_info["member_id"]
    form = await request.post()
    role = str(form.get("role", ""))
    staff = request[STAFF]
    if not confirmed(form):
        member = await _member(request, member_id)
        if role not in staff_store.ROLES:
            return await _staff_page(request, status=400, error=f"Role not changed: the role must be one "
                                                                f"of {', '.join(staff_store.ROLES)}.")
        if role == member.role:
            return see_other("/dashboard/staff")
        pages = {"admin": "every page: API keys, webhooks, staff, the audit log, borrowers and networks",
                 "analyst": "the borrowers only (read-only)", "operator": "the networks only"}
        return confirm_page(
            request, title="Change this member's role?", button=f"Make them {role}", back="/dashboard/staff",
            question=f"Make {member.email} {role} instead of {member.role}?", fields={"role": role},
            consequences=[f"From their next page they may open {pages[role]}.",
                          *(["You give up your own admin role: you leave the staff page at once."]
                            if member_id == staff.member_id and role != "admin" else [])])
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
    if not confirmed(await request.post()):
        member = await _member(request, member_id)
        return confirm_page(
            request, title="Remove this member?", button="Remove the member", back="/dashboard/staff",
            question=f"Remove {member.email} ({member.role}) from {staff.organisation_name}?",
            consequences=["Their sessions end at once and they can no longer sign in.",
                          "The audit log keeps what they did, by email.",
                          *(["You are removing yourself: you are signed out."] if member_id == staff.member_id
                            else [])])
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


@routes.post("/dashboard/staff/{member_id}/reset-password")
@requires("admin")
async def reset_password(request: web.Request) -> web.StreamResponse:
    """A new first password for a member who lost theirs: shown once, replaced at their next sign-in."""
    member_id = request.match_info["member_id"]
    staff = request[STAFF]
    if not confirmed(await request.post()):
        member = await _member(request, member_id)
        return confirm_page(
            request, title="Reset this member's password?", button="Reset the password",
            back="/dashboard/staff", question=f"Give {member.email} a new password?",
            consequences=["Their current password stops working and their sessions end at once.",
                          "You are shown the new password once, to hand over privately; they must replace it "
                          "when they sign in."])
    async with request.app[ENGINE].begin() as conn:
        reset = await staff_store.reset_password(conn, staff.organisation_id, member_id)
        if reset is None:
            raise _not_found(member_id)
        member, password = reset
        await audit.record(conn, staff, "staff.password_reset", member_id, {"email": member.email},
                           request.get(REQUEST_ID))
    if member_id == staff.member_id:  # one's own sessions ended with the reset
        return see_other("/dashboard/sign-in")
    return render(request, "secret_shown.html", title="Password reset",
                  what=f"{member.email} signs in to {staff.organisation_name} with this password.",
                  secret=password, back="/dashboard/staff", back_label="Back to staff",
                  note="Hand it over privately: it is shown only once, and the member must replace it when "
                       "they sign in.")


def _password_page(request: web.Request, *, status: int = 200, error: str | None = None,
                   changed: bool = False) -> web.Response:
    next_path = safe_next(request.query.get("next"), default="")
    return render(request, "password.html", status=status, error=error, changed=changed,
                  forced=request[STAFF].must_change_password, next_path=next_path)


@routes.get(PASSWORD_PATH)
@requires()
async def password_page(request: web.Request) -> web.StreamResponse:
    return _password_page(request, changed=request.query.get("changed") == "1")


TOO_MANY = ("Too many password attempts for your account or from your address. Wait five minutes and try "
            "again.")


@routes.post(PASSWORD_PATH)
@requires()
async def change_password(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    current, new, again = (str(form.get(name, "")) for name in ("current", "new", "again"))
    staff = request[STAFF]
    async with request.app[ENGINE].begin() as conn:  # counted whatever the outcome, before any check
        allowed = await staff_store.count_password_attempt(conn, staff, request_client(request))
    if not allowed:
        return _password_page(request, status=429, error=TOO_MANY)
    if new != again:
        return _password_page(request, status=400, error="The new password and its repetition differ.")
    try:
        async with request.app[ENGINE].begin() as conn:
            if not await staff_store.change_password(conn, staff, current, new, request.cookies[COOKIE]):
                return _password_page(request, status=400, error="The current password is not right.")
            await audit.record(conn, staff, "staff.password_changed", staff.member_id, {},
                               request.get(REQUEST_ID))
    except staff_store.StaffError as exc:
        return _password_page(request, status=400, error=f"Not changed: {exc}.")
    next_path = safe_next(request.query.get("next"), default="")
    return see_other(next_path or f"{PASSWORD_PATH}?changed=1")
