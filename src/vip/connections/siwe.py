"""Sign-In with Ethereum (EIP-4361) checks for wallet connections, on top of the `siwe` library.

The library parses the message and checks domain, chain id, expiry and the signature (EOA recovery, or
ERC-1271 / ERC-6492 through a web3 provider). We choose the domain: the message's must be one of the
organisation's sign-in sites (vip.connections.sign_in_domains; the service's own host only in local
mode). We add the address, the issued-at time, the URI, which must be under one of that site's URI
prefixes (the library leaves it unchecked: a message signed for another site's URI under the domain
would pass), and the statement, which is ours (`STATEMENT`, handed out with every nonce): a wallet must
have been shown what we say it signs in for, not a text of someone else's choosing. It does not track
nonces: the caller does that against `wallet_nonces` (the nonce must be the user's own), in the
transaction that creates the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
import siwe
from pydantic import ValidationError
from web3 import HTTPProvider, Web3
from web3.exceptions import Web3Exception

from vip.connections.sign_in_domains import SignInSite
from vip.errors import ChainUnavailable, Unprocessable, ValidationFailed

# The one statement a sign-in may carry, word for word: what the borrower's wallet shows them.
STATEMENT = "Connect this wallet to verify my income."
# Clients stamp Issued At with their own clock; allow that much drift ahead of the service clock.
ISSUED_AT_SKEW = timedelta(minutes=5)
MAX_MESSAGE_CHARS = 8192

_REFUSALS: dict[type[siwe.VerificationError], tuple[str, str]] = {
    siwe.DomainMismatch: ("ERR_DOMAIN_MISMATCH", "the message's domain is not a sign-in domain of this "
                                                 "organisation"),
    siwe.SchemeMismatch: ("ERR_DOMAIN_MISMATCH", "the message's scheme is not its sign-in domain's"),
    siwe.ChainIdMismatch: ("ERR_CHAIN_ID_MISMATCH", "the message's chain id is not the network's"),
    siwe.ExpiredMessage: ("ERR_MESSAGE_EXPIRED", "the message's expiration time has passed"),
    siwe.NotYetValidMessage: ("ERR_MESSAGE_NOT_YET_VALID", "the message's not-before time is still ahead"),
    siwe.InvalidSignature: ("ERR_INVALID_SIGNATURE", "the signature is not the address's signature of "
                                                     "the message"),
}


def refused(code: str, message: str, details: dict[str, Any] | None = None) -> Unprocessable:
    return Unprocessable(message, details, code=code)


def parse_message(text: str) -> siwe.SiweMessage:
    """The EIP-4361 message, or a 400 saying what is wrong with it."""
    try:
        return siwe.SiweMessage.from_message(text)
    except ValidationError as exc:  # the grammar matched, a field's value did not
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        reason = f"{field}: {err['msg'].removeprefix('Value error, ')}"
        raise ValidationFailed("the message is not a valid EIP-4361 message", {"message": reason}) from exc
    except ValueError as exc:
        raise ValidationFailed("the message is not a valid EIP-4361 message",
                               {"message": "does not follow the EIP-4361 grammar"}) from exc


def issued_at(message: siwe.SiweMessage) -> datetime:
    return datetime.fromisoformat(str(message.issued_at))


def site_of(message: siwe.SiweMessage, sites: Sequence[SignInSite]) -> SignInSite:
    """The sign-in site the message names (its `domain`), or ERR_DOMAIN_MISMATCH naming the accepted ones."""
    domain = str(message.domain).lower()
    for site in sites:
        if site.domain == domain:
            return site
    raise refused("ERR_DOMAIN_MISMATCH", "the message's domain is not a sign-in domain of this organisation "
                  "(register the site borrowers sign in on: PUT /v1/sign-in-domains/{domain})",
                  {"domain": str(message.domain), "accepted_domains": [site.domain for site in sites]})


def _under(uri: str, prefix: str) -> bool:
    """Whether `uri` is on the prefix's origin (scheme and authority, any case) and under its path."""
    given, wanted = urlsplit(uri), urlsplit(prefix)
    return ((given.scheme.lower(), given.netloc.lower()) == (wanted.scheme.lower(), wanted.netloc.lower())
            and (given.path or "/").startswith(wanted.path or "/"))


async def verify_message(message: siwe.SiweMessage, signature: str, *, address: str,
                         sites: Sequence[SignInSite], chain_id: int, now: datetime, rpc_url: str | None,
                         rpc_timeout_s: float) -> None:
    """Every check but the nonce's; raises a 422 with a specific code on the first failure."""
    if message.address.lower() != address.lower():
        raise refused("ERR_ADDRESS_MISMATCH", "the message is signed in for another address",
                      {"address": address, "message_address": message.address})
    if issued_at(message) > now + ISSUED_AT_SKEW:
        raise refused("ERR_MESSAGE_NOT_YET_VALID", "the message's issued-at time is in the future",
                      {"issued_at": str(message.issued_at)})
    site = site_of(message, sites)
    schemes = [urlsplit(prefix).scheme for prefix in site.uri_prefixes]
    scheme = message.scheme if message.scheme in schemes else schemes[0]
    # Recovery is CPU work and the contract-wallet path is blocking HTTP: keep both off the event loop.
    await asyncio.to_thread(_verify_sync, message, signature, domain=str(message.domain), scheme=scheme,
                            chain_id=chain_id, now=now, rpc_url=rpc_url, rpc_timeout_s=rpc_timeout_s)
    if not any(_under(str(message.uri), prefix) for prefix in site.uri_prefixes):
        raise refused("ERR_URI_MISMATCH", "the message's URI is not under a URI prefix of its sign-in domain",
                      {"uri": str(message.uri), "uri_prefixes": list(site.uri_prefixes)})
    if message.statement != STATEMENT:
        raise refused("ERR_STATEMENT_MISMATCH", "the message's statement is not the one this service issues "
                      "with the nonce (GET /v1/connect/wallet/nonce, `statement`), word for word",
                      {"statement": message.statement, "expected_statement": STATEMENT})


def _verify_sync(message: siwe.SiweMessage, signature: str, *, domain: str, scheme: str, chain_id: int,
                 now: datetime, rpc_url: str | None, rpc_timeout_s: float) -> None:
    # The scheme line is optional in EIP-4361; when present it must be ours.
    wanted_scheme = scheme if message.scheme is not None else None

    def verify(provider: HTTPProvider | None = None) -> None:
        message.verify(signature, domain=domain, chain_id=chain_id, timestamp=now, scheme=wanted_scheme,
                       provider=provider)

    try:
        try:
            # EOA first: no RPC at all for the common case.
            verify()
        except siwe.InvalidSignature:
            if rpc_url is None:
                raise
            # No provider-level retries: a hung node would hold the request for several time-outs; the
            # client retries the sign-in instead.
            provider = HTTPProvider(rpc_url, request_kwargs={"timeout": rpc_timeout_s},
                                    exception_retry_configuration=None)
            # A contract wallet (code at the address) or a counterfactual one (ERC-6492 wrapper) signs
            # through the chain; anything else stays a wrong signature.
            if not (siwe.is_eip6492_signature(signature)
                    or Web3(provider).eth.get_code(Web3.to_checksum_address(message.address))):
                raise
            verify(provider)
    except siwe.VerificationError as exc:
        code, text = _REFUSALS.get(type(exc), ("ERR_INVALID_SIGNATURE", "the sign-in could not be verified"))
        raise refused(code, text) from exc
    except (requests.RequestException, Web3Exception) as exc:
        raise ChainUnavailable("the network's RPC did not answer; retry shortly") from exc
