"""A page that asks before an action that cannot be taken back (revoke a key, delete or disable an endpoint,
remove a member, change a role, reset a password). No script: the list's button posts its form without
`confirmed=yes`, and the handler answers this page, whose own form posts the same fields with it. So one
click never acts, whatever page or link sent the first POST."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiohttp import web
from multidict import MultiMapping

from vip.dashboard.render import render

CONFIRMED = "yes"


def confirmed(form: MultiMapping[object]) -> bool:
    """Whether the form came from the confirmation page."""
    return form.get("confirmed") == CONFIRMED


def confirm_page(request: web.Request, *, title: str, question: str, consequences: Sequence[str],
                 button: str, back: str, fields: Mapping[str, str] | None = None) -> web.Response:
    """The question, what will happen, and a form posting `fields` (and `confirmed=yes`) to this same
    path; `back` is where "Cancel" leads."""
    return render(request, "confirm.html", title=title, question=question, consequences=list(consequences),
                  button=button, back=back, action=request.path, fields=dict(fields or {}),
                  confirmed=CONFIRMED)
