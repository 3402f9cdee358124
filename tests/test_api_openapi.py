"""The OpenAPI document: valid, complete (every route of the app is in it), served as JSON and as a page."""

from __future__ import annotations

import re

from openapi_spec_validator import validate

from vip.api.app import create_app
from vip.api.openapi import document
from vip.api.routes.docs import BUNDLE_PATH


def app_routes(app) -> set[tuple[str, str]]:
    """The API's routes (the dashboard's HTML pages under /dashboard are no API operation)."""
    return {(route.method.lower(), route.resource.canonical) for route in app.router.routes()
            if route.method not in ("HEAD", "*") and not route.resource.canonical.startswith("/dashboard")}


async def test_document_is_valid_openapi_3_1(api):
    resp = await api.client.get("/v1/openapi.json")
    assert resp.status == 200
    doc = await resp.json()
    assert doc["openapi"] == "3.1.0"
    validate(doc)


async def test_every_route_is_documented(api):
    doc = document(api.settings.api.public_base_url)
    documented = {(verb, path) for path, item in doc["paths"].items() for verb in item}
    served = app_routes(create_app(api.settings, "postgresql+psycopg://unused/unused"))
    operational = {("get", "/healthz"), ("get", "/readyz"), ("get", "/metrics"), ("get", "/docs"),
                   ("get", "/v1/openapi.json"), ("get", BUNDLE_PATH)}
    assert served - operational <= documented, f"undocumented: {sorted(served - operational - documented)}"
    assert documented <= served, f"documented but not served: {sorted(documented - served)}"


async def test_docs_page_is_served_without_third_party_assets(api):
    resp = await api.client.get("/docs")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    assert "<redoc spec-url='/v1/openapi.json'" in page
    # Everything the page loads comes from us: one script, the bundle at our own path; nothing else.
    assert re.findall(r"src=['\"]([^'\"]*)", page) == [BUNDLE_PATH]
    assert "<link" not in page and "//" not in page
    # and the browser is told so: only our own origin
    assert resp.headers["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self';")
    bundle = await api.client.get(BUNDLE_PATH)
    assert bundle.status == 200 and bundle.content_type == "application/javascript"
    assert len(await bundle.read()) > 500_000


REQUIRED_SCOPE = re.compile(r"Requires an API key with the `(\w+)` scope\.")


def documented_scope(operation: dict) -> str | None:
    """The scope an operation of the document states: None for a public one (`security: []`)."""
    if operation.get("security") == []:
        return None
    found = REQUIRED_SCOPE.search(operation.get("description", ""))
    assert found, f"{operation['summary']}: neither public nor a stated scope"
    return found.group(1)


async def test_each_handler_requires_the_scope_the_document_states(api):
    """A lender reads the scope an operation needs from the document: the handler must demand exactly that
    one, and say so itself (a handler without `requires`/`public` would fall back on the access
    middleware's default)."""
    doc = document(api.settings.api.public_base_url)
    app = create_app(api.settings, "postgresql+psycopg://unused/unused")
    checked = 0
    for route in app.router.routes():
        operation = doc["paths"].get(route.resource.canonical, {}).get(route.method.lower())
        if operation is None:
            continue
        assert hasattr(route.handler, "required_scope"), f"{route.method} {route.resource.canonical}"
        assert route.handler.required_scope == documented_scope(operation), (
            route.method, route.resource.canonical)
        checked += 1
    assert checked == sum(len(item) for item in doc["paths"].values())
