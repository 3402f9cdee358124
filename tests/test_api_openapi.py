"""The OpenAPI document: valid, complete (every route of the app is in it), served as JSON and as a page."""

from __future__ import annotations

from openapi_spec_validator import validate

from vip.api.app import create_app
from vip.api.openapi import document


def app_routes(app) -> set[tuple[str, str]]:
    return {(route.method.lower(), route.resource.canonical) for route in app.router.routes()
            if route.method not in ("HEAD", "*")}


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
                   ("get", "/v1/openapi.json")}
    assert served - operational <= documented, f"undocumented: {sorted(served - operational - documented)}"
    assert documented <= served, f"documented but not served: {sorted(documented - served)}"


async def test_docs_page_is_served_without_third_party_assets(api):
    resp = await api.client.get("/docs")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    assert "<code>/v1/users</code>" in page and "<h3 id='Error'>" in page
    # Nothing is loaded from elsewhere: no scripts, no external stylesheets or images.
    assert "<script" not in page and "<link" not in page and "src=" not in page
