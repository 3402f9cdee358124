"""GET /v1/openapi.json, and the reference page at /docs: Redoc renders the same document in the browser.

Redoc's standalone bundle is served from our own route, from a copy in the package (api/static, the
version pinned in package.json; tests/test_openapi_reference.py checks the copy is that version's file),
so the page works offline and from an installed wheel, which has no node_modules (docs/decisions.md).
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources

from aiohttp import web

from vip.api.context import SETTINGS, public
from vip.api.jsonio import json_response
from vip.api.openapi import document
from vip.api.openapi_constraints import ServedValues

routes = web.RouteTableDef()

REDOC_BUNDLE = "redoc.standalone.js"
BUNDLE_PATH = f"/docs/{REDOC_BUNDLE}"
# Redoc's options (https://redocly.com/docs/redoc/config): examples and the success responses open,
# required fields first, the search box kept.
_OPTIONS = {"expand-responses": "200,201,202", "sort-required-props-first": "true",
            "path-in-middle-panel": "true", "json-sample-expand-level": "3", "hide-hostname": "true",
            "show-webhook-verb": "true"}


# The one address the bundle would fetch from elsewhere: the sidebar's "API docs by Redocly" logo. Served
# without it (an empty src fails at once and Redoc then hides the image); the file itself stays the
# pinned version's, byte for byte.
_ELSEWHERE = b'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'
# Only our own origin; Redoc's styles are inline (styled-components) and its search runs in a blob worker.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:; "
                           "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def vendored_bundle() -> bytes:
    """Redoc's standalone bundle as package.json pins it (api/static)."""
    return resources.files("vip.api").joinpath("static", REDOC_BUNDLE).read_bytes()


@cache
def redoc_bundle() -> bytes:
    """The bundle as served: the vendored file without its one fetch from elsewhere."""
    bundle = vendored_bundle()
    if bundle.count(_ELSEWHERE) != 1:
        raise RuntimeError(f"{REDOC_BUNDLE}: the logo's address moved; see api/routes/docs.py")
    return bundle.replace(_ELSEWHERE, b'src:""')


def render(title: str) -> str:
    options = " ".join(f'{name}="{value}"' for name, value in _OPTIONS.items())
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)} · reference</title><style>body{{margin:0}}</style></head><body>"
            f"<noscript>The reference needs JavaScript; the document itself is "
            f"<a href='/v1/openapi.json'>/v1/openapi.json</a> (OpenAPI 3.1).</noscript>"
            f"<redoc spec-url='/v1/openapi.json' {options}></redoc>"
            f"<script src='{BUNDLE_PATH}'></script></body></html>")


@routes.get("/v1/openapi.json")
@public
async def openapi_json(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    return json_response(document(settings.api.public_base_url, ServedValues.of(settings)))


@routes.get("/docs")
@public
async def docs_page(request: web.Request) -> web.Response:
    title = document(request.app[SETTINGS].api.public_base_url)["info"]["title"]
    return web.Response(text=render(title), content_type="text/html",
                        headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})


@routes.get(BUNDLE_PATH)
@public
async def docs_bundle(request: web.Request) -> web.Response:
    return web.Response(body=redoc_bundle(), content_type="application/javascript", charset="utf-8",
                        headers={"Cache-Control": "public, max-age=3600"})
