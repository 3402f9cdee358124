"""The OpenAPI 3.1 document of the API, served at /v1/openapi.json and rendered at /docs.

Request bodies come from the pydantic models the handlers validate with, so the document cannot drift
from validation; response schemas come from api/openapi_schemas.py and the paths from api/openapi_paths.py.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel

from vip.api.openapi_paths import BODY_MODELS, PATHS
from vip.api.openapi_schemas import API_VERSION, SCHEMAS


def _body_schemas(models: list[type[BaseModel]]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return schemas


def build_document(paths: dict[str, dict[str, Any]], body_models: list[type[BaseModel]],
                   base_url: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Stablecoin income verification, risk scoring and disbursement API",
            "version": API_VERSION,
            "description": "Amounts of tokens are token units (USDC and USDT have 6 decimals) and USD "
                           "values are exact decimal numbers with at most 6 decimals. Timestamps are "
                           "ISO 8601 UTC. Every response carries X-Request-Id and X-RateLimit-* headers; "
                           "every error has the body in the Error schema.",
        },
        "servers": [{"url": base_url}],
        "components": {
            "schemas": {**copy.deepcopy(SCHEMAS), **_body_schemas(body_models)},
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "Authorization: Bearer <secret API key>"}},
        },
        "security": [{"apiKey": []}],
        "paths": paths,
    }


@cache
def document(base_url: str) -> dict[str, Any]:
    """The served document (built once per process)."""
    return build_document(PATHS, BODY_MODELS, base_url)
