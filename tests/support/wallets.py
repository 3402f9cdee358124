"""Sign-In with Ethereum for tests: real EIP-4361 messages, signed with real keys, for the real API."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlsplit

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from siwe import ISO8601Datetime, SiweMessage

from tests.support.api import ApiHarness
from vip.connections.siwe import STATEMENT
from vip.devstack.anvil import AnvilNode

# Minimal ERC-1271 wallets as raw runtime code: PUSH4 <value> PUSH1 0xe0 SHL PUSH1 0 MSTORE
# PUSH1 0x20 PUSH1 0 RETURN, i.e. every call returns <value> left-aligned in one 32-byte word.
ALWAYS_VALID_1271 = "0x631626ba7e60e01b60005260206000f3"  # the magic value 0x1626ba7e
NEVER_VALID_1271 = "0x63ffffffff60e01b60005260206000f3"  # 0xffffffff: "not my signature"


def service_domain(api: ApiHarness) -> str:
    return urlsplit(api.settings.api.public_base_url).netloc


def siwe_text(address: str, nonce: str, *, domain: str, chain_id: int, issued_at: datetime,
              expiration_time: datetime | None = None, uri: str | None = None) -> str:
    return SiweMessage(
        domain=domain, address=address, uri=uri or f"http://{domain}/", version="1", chain_id=chain_id,
        nonce=nonce, statement=STATEMENT,
        issued_at=ISO8601Datetime.from_datetime(issued_at),
        expiration_time=ISO8601Datetime.from_datetime(expiration_time) if expiration_time else None,
    ).prepare_message()


def sign(text: str, account: LocalAccount) -> str:
    return "0x" + Account.sign_message(encode_defunct(text=text), account.key).signature.hex()


async def get_nonce(api: ApiHarness, user_id: str, org: str = "acme") -> tuple[str, datetime]:
    """A fresh nonce for the user and the service's "now" when it was issued."""
    resp = await api.client.get("/v1/connect/wallet/nonce", headers={**await api.headers(org),
                                                                      "X-User-Id": user_id})
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    expires_at = datetime.fromisoformat(body["expires_at"])
    return body["nonce"], expires_at - timedelta(minutes=10)


async def sign_in_body(api: ApiHarness, user_id: str, account: LocalAccount, *, org: str = "acme",
                       nonce: str | None = None, issued_at: datetime | None = None,
                       domain: str | None = None, chain_id: int | None = None,
                       expiration_time: datetime | None = None, signer: LocalAccount | None = None,
                       address: str | None = None, network: str = "local", uri: str | None = None) -> dict:
    """A POST /v1/connect/wallet body, signed correctly unless an argument says otherwise."""
    if nonce is None:
        nonce, issued = await get_nonce(api, user_id, org)
        issued_at = issued_at or issued
    address = address or account.address
    text = siwe_text(address, nonce, domain=domain or service_domain(api),
                     chain_id=api.settings.networks["local"].chain_id if chain_id is None else chain_id,
                     issued_at=issued_at, expiration_time=expiration_time, uri=uri)
    return {"user_id": user_id, "address": address, "network": network, "message": text,
            "signature": sign(text, signer or account)}


async def connect(api: ApiHarness, user_id: str, account: LocalAccount, org: str = "acme",
                  expect: int = 201) -> dict:
    body = await sign_in_body(api, user_id, account, org=org)
    resp = await api.client.post("/v1/connect/wallet", json=body, headers=await api.headers(org))
    assert resp.status == expect, await resp.text()
    return (await resp.json())["connection"]


def contract_wallet(node: AnvilNode, runtime: str) -> str:
    """A fresh address holding `runtime` as its code (checksummed)."""
    address = Account.create().address
    node.call("anvil_setCode", [address, runtime])
    return address
