"""GET /v1/openapi.json and a readable page at /docs, rendered here from the same document (no CDN, no
third-party assets)."""

from __future__ import annotations

import html
import json
from typing import Any

from aiohttp import web

from vip.api.context import SETTINGS, public
from vip.api.jsonio import json_response
from vip.api.openapi import document

routes = web.RouteTableDef()

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:980px;margin:2rem auto;padding:0 1rem;color:#1b1f24}
h1{font-size:1.6rem} h2{margin-top:2.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem}
.op{border:1px solid #d0d7de;border-radius:6px;margin:1rem 0;padding:.6rem 1rem}
.verb{font-weight:700;text-transform:uppercase;display:inline-block;min-width:4.5rem}
code,pre{font-family:ui-monospace,monospace;font-size:13px} pre{background:#f6f8fa;padding:.6rem;
overflow:auto;border-radius:6px} table{border-collapse:collapse} td,th{padding:.2rem .6rem;text-align:left;
border-bottom:1px solid #eaeef2} .muted{color:#57606a}
"""


def _schema_text(schema: dict[str, Any]) -> str:
    return html.escape(json.dumps(schema, indent=2))


def render(doc: dict[str, Any]) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(doc['info']['title'])}"
             f"</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(doc['info']['title'])}</h1>",
             f"<p>{html.escape(doc['info']['description'])}</p>",
             "<p class='muted'>Machine-readable: <a href='/v1/openapi.json'>/v1/openapi.json</a> "
             "(OpenAPI 3.1).</p>"]
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for path, item in doc["paths"].items():
        for verb, op in item.items():
            by_tag.setdefault(op["tags"][0], []).append((verb, path, op))
    for tag, ops in by_tag.items():
        parts.append(f"<h2>{html.escape(tag)}</h2>")
        for verb, path, op in ops:
            parts.append(f"<div class='op'><span class='verb'>{verb}</span> <code>{html.escape(path)}</code>"
                         f"<p>{html.escape(op['summary'])}. {html.escape(op.get('description', ''))}</p>")
            params = op.get("parameters", [])
            if params:
                parts.append("<table><tr><th>parameter</th><th>in</th><th>required</th><th>schema</th>"
                             "<th></th></tr>")
                parts.extend(f"<tr><td><code>{html.escape(p['name'])}</code></td><td>{p['in']}</td>"
                             f"<td>{'yes' if p.get('required') else 'no'}</td>"
                             f"<td><code>{html.escape(json.dumps(p['schema']))}</code></td>"
                             f"<td>{html.escape(p.get('description', ''))}</td></tr>" for p in params)
                parts.append("</table>")
            if "requestBody" in op:
                name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                parts.append(f"<p>Body: <code>{name}</code></p>"
                             f"<pre>{_schema_text(doc['components']['schemas'][name])}</pre>")
            codes = ", ".join(f"<code>{c}</code> {html.escape(r['description'])}"
                              for c, r in op["responses"].items())
            parts.append(f"<p class='muted'>Responses: {codes}</p></div>")
    parts.append("<h2>Schemas</h2>")
    for name, schema in doc["components"]["schemas"].items():
        anchor = html.escape(name)
        parts.append(f"<h3 id='{anchor}'>{anchor}</h3><pre>{_schema_text(schema)}</pre>")
    parts.append("</body></html>")
    return "".join(parts)


@routes.get("/v1/openapi.json")
@public
async def openapi_json(request: web.Request) -> web.Response:
    return json_response(document(request.app[SETTINGS].api.public_base_url))


@routes.get("/docs")
@public
async def docs_page(request: web.Request) -> web.Response:
    return web.Response(text=render(document(request.app[SETTINGS].api.public_base_url)),
                        content_type="text/html")
