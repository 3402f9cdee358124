"""Domain and HTTP errors, and the spec's error body. Handlers raise `ApiError`s; one middleware renders
them (`api.middleware.errors`)."""

from __future__ import annotations

from typing import Any

# How much of an error's text is kept wherever one is shown or stored: a log line, an error body, a
# delivery attempt. Enough for a message and its cause, never a whole page a server answered.
ERROR_TEXT_LIMIT = 300


class ApiError(Exception):
    """An error the client sees: HTTP status, stable code, message and details."""

    status = 400
    code = "ERR_BAD_REQUEST"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, code: str | None = None,
                 status: int | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.code = code or self.code
        self.status = status or self.status
        self.headers = headers or {}


class ValidationFailed(ApiError):
    status, code = 400, "ERR_VALIDATION"


class Unauthorized(ApiError):
    status, code = 401, "ERR_UNAUTHORIZED"


class Forbidden(ApiError):
    status, code = 403, "ERR_FORBIDDEN"


class NotFound(ApiError):
    status, code = 404, "ERR_NOT_FOUND"


class Conflict(ApiError):
    status, code = 409, "ERR_CONFLICT"


class Unprocessable(ApiError):
    status, code = 422, "ERR_UNPROCESSABLE"


class RateLimited(ApiError):
    status, code = 429, "ERR_RATE_LIMITED"


class PlatformSyncFailed(ApiError):
    status, code = 502, "ERR_PLATFORM_SYNC_FAILED"


class ChainUnavailable(ApiError):
    """A network's RPC did not answer a call the request needs."""

    status, code = 502, "ERR_CHAIN_UNAVAILABLE"


class InternalError(ApiError):
    status, code = 500, "ERR_INTERNAL"


def error_body(code: str, message: str, details: dict[str, Any], request_id: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details, "request_id": request_id}}
