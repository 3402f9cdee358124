"""Check every response the app sends in a test against the served OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from jsonschema import Draft202012Validator

from vip.api.openapi import document

Violation = tuple[str, str, int, str]


def response_schema(doc: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any] | None:
    """The JSON schema of that response; KeyError when the document does not describe it."""
    operation = doc["paths"][path][method.lower()]
    response = operation["responses"][str(status)]
    content = response.get("content", {}).get("application/json")
    return content["schema"] if content else None


def violations_of(doc: dict[str, Any], method: str, path: str, status: int, body: Any) -> list[str]:
    try:
        schema = response_schema(doc, method, path, status)
    except KeyError:
        return [f"{method} {path} answered {status}, which the document does not list"]
    if schema is None:
        return []
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    return [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
            for e in validator.iter_errors(body)]


def conformance_middleware(found: list[Violation], base_url: str):
    """A middleware for test apps: records every response that breaks the document."""
    doc = document(base_url)

    @web.middleware
    async def check(request: web.Request, handler) -> web.StreamResponse:
        response = await handler(request)
        route = request.match_info.route.resource
        template = route.canonical if route is not None else request.path
        documented = request.method.lower() in doc["paths"].get(template, {})
        if documented and isinstance(response, web.Response) and response.content_type == "application/json":
            body = json.loads(response.text)
            found.extend((request.method, template, response.status, problem)
                         for problem in violations_of(doc, request.method, template, response.status, body))
        return response

    return check
