"""Parse request bodies and query strings into pydantic models; failures are 400s naming each field."""

from __future__ import annotations

from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from vip.api.jsonio import loads
from vip.errors import ValidationFailed

M = TypeVar("M", bound=BaseModel)
# How deep a request body may nest (the body object itself is level 1). Deeper JSON is refused before any
# of it is walked: validators, the NUL scan, the encoder and jsonb all recurse.
MAX_JSON_DEPTH = 32
# Unicode White_Space: what the validators strip from a text's ends (`str_strip_whitespace`) and what `\s`
# means to them. Spelled out for the document's patterns because `\s` is not the same set in every regex
# dialect (ECMA-262 adds U+FEFF, Python's `re` adds U+001C-U+001F): a client or a generator reading `\s` its
# way would send what the API refuses (a fuzz run sent U+0085 as a user id).
WHITESPACE = r"\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
SPACE = f"[{WHITESPACE}]"
# The pattern of a required text field: surrounding whitespace is stripped before length checks, so a
# blank value is refused; the pattern says so in the document.
NOT_BLANK = f"[^{WHITESPACE}]"


class Body(BaseModel):
    """Base of request bodies: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Query(BaseModel):
    """Base of query strings: unknown parameters are refused."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def _details(exc: ValidationError) -> dict[str, Any]:
    details: dict[str, Any] = {}
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "body"
        message = err["msg"].removeprefix("Value error, ")
        details.setdefault(field, message)
    return details


def _nul_path(value: Any, path: str) -> str | None:
    """Where a NUL character hides in a JSON value (PostgreSQL text cannot store one), if anywhere."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return f"{path}.{key!r}".lstrip(".")
        found = _nul_path(item, f"{path}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def validate(model: type[M], data: Any, what: str) -> M:
    if (where := _nul_path(data, "")) is not None:
        raise ValidationFailed("strings may not contain NUL characters", {where or what: "contains NUL"})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = _details(exc)
        raise ValidationFailed(f"invalid {what}: " + ", ".join(sorted(details)), details) from exc


def _too_deep(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than `limit` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _too_deep_error() -> ValidationFailed:
    return ValidationFailed(f"the body nests deeper than {MAX_JSON_DEPTH} levels",
                            {"body": f"nested deeper than {MAX_JSON_DEPTH} levels"})


async def read_body(request: web.Request, model: type[M]) -> M:
    raw = await request.read()
    if not raw.strip():
        raise ValidationFailed("a JSON body is required", {"body": "missing"})
    try:
        data = loads(raw)
    except RecursionError as exc:  # the parser's own guard, thousands of levels down
        raise _too_deep_error() from exc
    except ValueError as exc:
        raise ValidationFailed("the body is not valid JSON", {"body": str(exc)}) from exc
    if _too_deep(data, MAX_JSON_DEPTH):
        raise _too_deep_error()
    if not isinstance(data, dict):
        raise ValidationFailed("the body must be a JSON object", {"body": "not an object"})
    return validate(model, data, "body")


def read_query(request: web.Request, model: type[M]) -> M:
    data = {}
    for key in request.query:
        values = request.query.getall(key)
        if len(values) > 1:
            raise ValidationFailed(f"query parameter {key} is given more than once", {key: "repeated"})
        data[key] = values[0]
    return validate(model, data, "query")
