"""Which endpoint URLs we deliver to: absolute http(s) URLs with a host, without credentials; https
unless plain http is allowed (local development)."""

from __future__ import annotations

from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048


def check_endpoint_url(url: str, *, allow_http: bool) -> str:
    """The URL unchanged when acceptable; ValueError saying what is wrong otherwise."""
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise ValueError("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise ValueError("the URL must start with https://")
    if scheme == "http" and not allow_http:
        raise ValueError("the URL must use https (plain http is accepted only in local development)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("the URL must not carry credentials (user:password@)")
    if not parts.hostname:
        raise ValueError("the URL has no host")
    if port == 0:
        raise ValueError("the URL's port must be 1 to 65535")
    if parts.fragment:
        raise ValueError("the URL must not have a #fragment")
    return url
