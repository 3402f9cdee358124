"""The sites an organisation's borrowers sign in on. EIP-4361 binds a message to the site that asks for it
(its `domain`, which the wallet compares with the page's origin): a lender whose borrowers connect on
`app.lender.example` registers that domain, with the URI prefixes its messages may name, and a Sign-In
with Ethereum message is accepted only for one of its organisation's sites. The service's own host is
one more site in local mode only (`vip dev`, tests), where the reference page signs for it.

A domain is an organisation's own setting, not a claim over the name: two organisations may register the
same one (a nonce is issued to one organisation's user and spent by that organisation only, so a message
signed for one can never connect a wallet for the other)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Row, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import Settings
from vip.errors import NotFound, ValidationFailed
from vip.store.tables import sign_in_domains

MAX_DOMAINS = 50
MAX_PREFIXES = 10
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"^(?=.{{1,253}}(?::|$)){_LABEL}(?:\.{_LABEL})*(?::(?P<port>[0-9]{{1,5}}))?$")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class SignInSite:
    """A domain messages may name, and the URI prefixes a message for it may name."""

    domain: str  # lower-case authority: host or host:port
    uri_prefixes: tuple[str, ...]

    def json(self) -> dict[str, Any]:
        return {"domain": self.domain, "uri_prefixes": list(self.uri_prefixes)}


def parse_domain(value: str) -> str:
    """An RFC 3986 authority without user info: a host name (or IPv4 address), and a port if any."""
    domain = value.strip().lower()
    match = DOMAIN.fullmatch(domain)
    if match is None or (match.group("port") is not None and not 0 < int(match.group("port")) < 65536):
        raise ValidationFailed("domain must be a host name, with a port if the site has one "
                               "(app.lender.example, localhost:3000)", {"domain": value[:300]})
    return domain


def _host(domain: str) -> str:
    return domain.rsplit(":", 1)[0] if ":" in domain else domain


def parse_prefixes(domain: str, values: list[str] | None) -> tuple[str, ...]:
    """The URI prefixes of a domain: absolute URIs on it, https (http for a loopback host only), no
    query or fragment; `https://<domain>/` when none are given."""
    if not values:
        scheme = "http" if _host(domain) in LOOPBACK_HOSTS else "https"
        return (f"{scheme}://{domain}/",)
    if len(values) > MAX_PREFIXES:
        raise ValidationFailed(f"at most {MAX_PREFIXES} URI prefixes per domain",
                               {"uri_prefixes": f"{len(values)} given"})
    prefixes: list[str] = []
    for value in values:
        parts = urlsplit(value.strip())
        allowed = ("https", "http") if _host(domain) in LOOPBACK_HOSTS else ("https",)
        if (parts.scheme.lower() not in allowed or parts.netloc.lower() != domain or parts.query
                or parts.fragment or "@" in parts.netloc):
            raise ValidationFailed(f"each URI prefix must be an {' or '.join(allowed)} URI on {domain}, with "
                                   "no query or fragment", {"uri_prefixes": value[:300]})
        prefix = f"{parts.scheme.lower()}://{domain}{parts.path or '/'}"
        if prefix not in prefixes:
            prefixes.append(prefix)
    return tuple(prefixes)


def service_site(settings: Settings) -> SignInSite | None:
    """The service's own host (`api.public_base_url`) as a sign-in site: local mode only."""
    if not settings.is_development:
        return None
    base = urlsplit(settings.api.public_base_url)
    domain = base.netloc.rsplit("@")[-1].lower()
    return SignInSite(domain, (f"{base.scheme.lower()}://{domain}/",))


def _site(row: Row[Any]) -> SignInSite:
    return SignInSite(row.domain, tuple(row.uri_prefixes))


async def rows_of(conn: AsyncConnection, organisation_id: str) -> list[Row[Any]]:
    return list((await conn.execute(select(sign_in_domains).where(
        sign_in_domains.c.organisation_id == organisation_id).order_by(sign_in_domains.c.domain))).all())


async def accepted_sites(conn: AsyncConnection, settings: Settings, organisation_id: str) -> list[SignInSite]:
    """Where the organisation's borrowers may sign in: its registered domains, and the service's own host
    in local mode."""
    sites = [_site(row) for row in await rows_of(conn, organisation_id)]
    own = service_site(settings)
    if own is not None and all(site.domain != own.domain for site in sites):
        sites.append(own)
    return sites


async def list_domains(engine: AsyncEngine, organisation_id: str) -> list[Row[Any]]:
    async with engine.connect() as conn:
        return await rows_of(conn, organisation_id)


async def put_domain(conn: AsyncConnection, organisation_id: str, domain: str, uri_prefixes: list[str] | None,
                     now: datetime) -> tuple[Row[Any], bool]:
    """Register a domain (or replace its URI prefixes): (the row, whether it is new)."""
    domain = parse_domain(domain)
    prefixes = list(parse_prefixes(domain, uri_prefixes))
    count = await conn.scalar(select(func.count()).select_from(sign_in_domains).where(
        sign_in_domains.c.organisation_id == organisation_id, sign_in_domains.c.domain != domain))
    if (count or 0) >= MAX_DOMAINS:
        raise ValidationFailed(f"an organisation may register at most {MAX_DOMAINS} sign-in domains",
                               {"domain": domain})
    inserted = (await conn.execute(pg_insert(sign_in_domains).values(
        organisation_id=organisation_id, domain=domain, uri_prefixes=prefixes, created_at=now, updated_at=now,
    ).on_conflict_do_nothing().returning(*sign_in_domains.c))).first()
    if inserted is not None:
        return inserted, True
    updated = (await conn.execute(sign_in_domains.update().where(
        sign_in_domains.c.organisation_id == organisation_id, sign_in_domains.c.domain == domain,
    ).values(uri_prefixes=prefixes, updated_at=now).returning(*sign_in_domains.c))).one()
    return updated, False


async def remove_domain(conn: AsyncConnection, organisation_id: str, domain: str) -> Row[Any]:
    """Remove a registered domain: messages naming it are refused from now on."""
    removed = (await conn.execute(delete(sign_in_domains).where(
        sign_in_domains.c.organisation_id == organisation_id,
        sign_in_domains.c.domain == domain.strip().lower()).returning(*sign_in_domains.c))).first()
    if removed is None:
        raise NotFound("no such sign-in domain is registered to this organisation", {"domain": domain[:300]})
    return removed
