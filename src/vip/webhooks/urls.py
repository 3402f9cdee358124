"""Which endpoint URLs we deliver to: absolute http(s) URLs with a host, without credentials; https
unless plain http is allowed (local development).

Outside local development (`webhooks.allow_http` false) an endpoint must also not reach into our own
network (SSRF): every address its host resolves to must be a public unicast address, never loopback,
private, link-local, shared (CGNAT), multicast, reserved, unspecified or documentation space, nor an IPv6
form that embeds such an IPv4 address (mapped, 6to4, Teredo, NAT64). The URL is checked when it is
registered (`check_endpoint_url`, then `check_endpoint_host` after resolving the name) and again at every
delivery, on the addresses the connection actually uses (vip.webhooks.sender.GuardedResolver), so a name
that resolves elsewhere later (DNS rebinding) is caught.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048
REGISTRATION_RESOLVE_S = 5.0  # a registration waits this long for DNS, then leaves it to delivery

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_SHARED_V4 = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def refused_address_reason(address: str | IPAddress) -> str | None:
    """Why webhooks must not be delivered to this IP address (None: a public unicast address)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "a scoped IPv6 address"
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and any(ip in net for net in _NAT64):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            reason = refused_address_reason(embedded)
            return f"an IPv6 address embedding {embedded}, {reason}" if reason else None
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED_V4:
        return "a shared (carrier-grade NAT) address"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a public address"
    return None


def ip_literal(host: str) -> IPAddress | None:
    """The host as an IP address when it is written as one (IPv6 without brackets), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_endpoint_url(url: str, *, allow_http: bool) -> str:
    """The URL unchanged when acceptable; ValueError saying what is wrong otherwise. Outside local
    development (`allow_http` false) a host written as an IP address must be a public one."""
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
    if not allow_http:
        literal = ip_literal(parts.hostname)
        reason = refused_address_reason(literal) if literal is not None else None
        if reason:
            raise ValueError(f"the URL's host {parts.hostname} is {reason}; webhooks go to public addresses")
        if parts.hostname.rstrip(".").lower().endswith(("localhost", ".local", ".internal")):
            raise ValueError(f"the URL's host {parts.hostname} is a local name; webhooks go to public hosts")
    return url


async def resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (raises OSError when it gives none)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def refused_among(host: str, addresses: list[str]) -> str | None:
    """Why a host resolving to these addresses is refused (the first bad address), or None."""
    for address in addresses:
        reason = "a scoped IPv6 address" if "%" in address else refused_address_reason(address)
        if reason:
            return f"the URL's host {host} resolves to {address}, {reason}; webhooks go to public addresses"
    return None


async def check_endpoint_host(url: str, *, allow_http: bool) -> None:
    """At registration, after check_endpoint_url: ValueError when the URL's host name resolves to an
    address we refuse. A name that does not resolve (yet) is accepted: every delivery checks again."""
    if allow_http:
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ip_literal(host) is not None:
        return  # checked by check_endpoint_url
    try:
        addresses = await asyncio.wait_for(resolve(host, parts.port or 443), REGISTRATION_RESOLVE_S)
    except (OSError, TimeoutError):
        return
    reason = refused_among(host, addresses)
    if reason:
        raise ValueError(reason)
