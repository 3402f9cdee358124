"""GET /v1/transactions on the real app and PostgreSQL: every parameter and each class of bad input, tenancy,
fields and exact amounts, default exclusion of wash trades and circular flows, keyset pagination that
stays exact while transfers arrive, the query plan, and one end-to-end run with the real indexer on Anvil.

Most scenarios insert `token_transfers`, `transfer_labels`, `connections` and `wallets` rows directly
(what the indexer and the wallet connection flow would write), which keeps each test fast.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Context, Decimal
from typing import Any

from aiohttp.test_utils import TestClient
from eth_utils import to_checksum_address
from sqlalchemy import insert, text, update

from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import running_indexer, wait_synced
from vip.accounts import keys
from vip.api.app import create_app
from vip.api.jsonio import token_units
from vip.formats import checksummed
from vip.ids import new_id
from vip.indexer import store
from vip.store.tables import connections, token_transfers, transfer_labels, wallets
from vip.transactions.query import Filters, Position, transaction_id, transactions_query

NETWORK = "local"
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
BLOCK_TIME = timedelta(seconds=12)
UINT256_MAX = 2**256 - 1


def addr(n: int) -> str:
    return "0x" + f"{0xabc0_0000 + n:040x}"


def block_time(block: int) -> datetime:
    return EPOCH + block * BLOCK_TIME


def tx_hash(network: str, block: int, log_index: int) -> str:
    return "0x" + hashlib.sha256(f"{network}:{block}:{log_index}".encode()).hexdigest()


def transfer(block: int, log_index: int, frm: str, to: str, amount: int, token: str = "USDC",
             network: str = NETWORK) -> dict[str, Any]:
    return {"network": network, "tx_hash": tx_hash(network, block, log_index), "log_index": log_index,
            "block_number": block, "block_hash": "0x" + hashlib.sha256(f"b{block}".encode()).hexdigest(),
            "block_timestamp": block_time(block), "token": token,
            "token_address": "0x" + ("a" if token == "USDC" else "b") * 40,
            "from_address": frm, "to_address": to, "amount": amount}


def label(row: dict, wallet_address: str, classification: str, flags: list[str] | None = None,
          payroll_match: dict | None = None) -> dict[str, Any]:
    return {"network": row["network"], "tx_hash": row["tx_hash"], "log_index": row["log_index"],
            "wallet_address": wallet_address, "classification": classification,
            "fraud_flags": flags or [], "payroll_match": payroll_match}


@dataclass
class Wallet:
    id: str
    connection_id: str
    address: str
    network: str


async def org_id(engine, org: str) -> str:
    async with engine.begin() as conn:
        return await keys.ensure_organisation(conn, org)


async def add_wallet(engine, org: str, user_id: str, address: str, network: str = NETWORK,
                     created_at: datetime | None = None) -> Wallet:
    """What the wallet connection flow writes: an active wallet connection and its wallet."""
    organisation = await org_id(engine, org)
    when = created_at or datetime.now(UTC)
    connection_id, wallet_id = new_id("con"), new_id("wal")
    async with engine.begin() as conn:
        await conn.execute(insert(connections).values(
            id=connection_id, organisation_id=organisation, user_id=user_id, type="wallet",
            provider="metamask", identifier=address, network=network, status="active", created_at=when))
        await conn.execute(insert(wallets).values(
            id=wallet_id, organisation_id=organisation, user_id=user_id, connection_id=connection_id,
            address=address, network=network, created_at=when))
    return Wallet(wallet_id, connection_id, address, network)


async def revoke(engine, wallet: Wallet) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(connections).where(connections.c.id == wallet.connection_id)
                           .values(status="revoked", revoked_at=datetime.now(UTC)))


async def add_transfers(engine, rows: list[dict]) -> None:
    async with engine.begin() as conn:
        for start in range(0, len(rows), 1000):
            await conn.execute(insert(token_transfers), rows[start:start + 1000])


async def add_labels(engine, rows: list[dict]) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(transfer_labels), rows)


class Caller:
    """GETs with a key of `org`, taking a fresh key before the per-key rate limit of /v1/transactions
    (60 a minute) runs out."""

    def __init__(self, client: TestClient, engine, org: str = "acme", scopes: list[str] | None = None):
        self.client, self.engine, self.org, self.scopes = client, engine, org, scopes or ["read"]
        self.secret: str | None = None
        self.used = 0

    async def headers(self) -> dict[str, str]:
        if self.secret is None or self.used >= 50:
            async with self.engine.begin() as conn:
                organisation = await keys.ensure_organisation(conn, self.org)
                self.secret, _ = await keys.create_key(conn, organisation, self.scopes)
            self.used = 0
        self.used += 1
        return {"Authorization": f"Bearer {self.secret}"}

    async def get(self, path: str, params: dict[str, Any]) -> tuple[int, Any]:
        resp = await self.client.get(path, params={k: str(v) for k, v in params.items()},
                                     headers=await self.headers())
        # Exact numbers: Decimal, never float.
        return resp.status, json.loads(await resp.text(), parse_float=Decimal)

    async def page(self, params: dict[str, Any]) -> dict:
        status, body = await self.get("/v1/transactions", params)
        assert status == 200, body
        return body

    async def walk(self, params: dict[str, Any], limit: int, between=None) -> list[dict]:
        """Every page from the first on; `between(page_number)` runs before each following page."""
        found, cursor, number = [], None, 0
        while True:
            body = await self.page({**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
            assert len(body["transactions"]) <= limit
            found += body["transactions"]
            pagination = body["pagination"]
            if not pagination["has_more"]:
                assert pagination["cursor"] is None
                return found
            assert isinstance(pagination["cursor"], str) and len(body["transactions"]) == limit
            cursor = pagination["cursor"]
            number += 1
            if between is not None:
                await between(number)


LOG_INDEX: dict[str, int] = {}  # tx_hash -> log_index of the rows a test inserted


async def scenario(api, rows: list[dict]) -> None:
    for row in rows:
        LOG_INDEX[row["tx_hash"]] = row["log_index"]
    await add_transfers(api.engine, rows)


# --- pure helpers ---------------------------------------------------------------------------------------

def test_token_units_and_checksums():
    assert [str(token_units(raw, 6)) for raw in (0, 1, 10**6, 10**7, 123_450_000, 10**18 + 1)] == [
        "0", "0.000001", "1", "10", "123.45", "1000000000000.000001"]
    assert str(token_units(UINT256_MAX, 6)) == str(UINT256_MAX)[:-6] + "." + str(UINT256_MAX)[-6:]
    assert str(token_units(UINT256_MAX, 18)) == str(UINT256_MAX)[:-18] + "." + str(UINT256_MAX)[-18:]
    rng = random.Random(3)
    for _ in range(200):
        address = "0x" + rng.randbytes(20).hex()
        assert checksummed(address) == to_checksum_address(address)
    assert transaction_id("local", "0xab", 1, "wal_1") == transaction_id("local", "0xab", 1, "wal_1")
    assert transaction_id("local", "0xab", 1, "wal_1") != transaction_id("local", "0xab", 1, "wal_2")


# --- validation -----------------------------------------------------------------------------------------

async def test_every_parameter_is_validated(api):
    user_id = await api.user("acme")
    wallet = await add_wallet(api.engine, "acme", user_id, addr(1))
    await scenario(api, [transfer(b, 0, addr(9), wallet.address, 10**6) for b in range(1, 6)])
    caller = Caller(api.client, api.engine)
    base = {"user_id": user_id}
    good = await caller.page({**base, "limit": 2})
    cursor = good["pagination"]["cursor"]
    tampered = cursor[:-3] + ("AAA" if cursor[-3:] != "AAA" else "BBB")
    bad: list[tuple[dict[str, Any], str]] = [
        ({}, "user_id"),
        ({**base, "limit": 0}, "limit"),
        ({**base, "limit": 201}, "limit"),
        ({**base, "limit": -1}, "limit"),
        ({**base, "limit": "ten"}, "limit"),
        ({**base, "limit": "5.0"}, "limit"),
        ({**base, "direction": "sideways"}, "direction"),
        ({**base, "direction": "INBOUND"}, "direction"),
        ({**base, "classification": "salary"}, "classification"),
        ({**base, "classification": "wash_trade"}, "classification"),
        ({**base, "classification": "circular", "include_filtered": "false"}, "classification"),
        ({**base, "token": "DAI"}, "token"),
        ({**base, "from_date": "2025-13-01"}, "from_date"),
        ({**base, "from_date": "yesterday"}, "from_date"),
        ({**base, "to_date": "2025-02-30"}, "to_date"),
        ({**base, "to_date": "2025-01-01T25:00:00Z"}, "to_date"),
        ({**base, "to_date": "9999-12-31"}, "to_date"),
        ({**base, "from_date": "0001-01-01T00:00:00+01:00"}, "from_date"),
        ({**base, "from_date": "2025-01-01T00:00:00+2"}, "from_date"),
        ({**base, "from_date": "2025-02-01", "to_date": "2025-01-31"}, "from_date"),
        ({**base, "from_date": "2025-01-31T12:00:01Z", "to_date": "2025-01-31T12:00:00Z"}, "from_date"),
        ({**base, "include_filtered": "yes"}, "include_filtered"),
        ({**base, "include_filtered": "1"}, "include_filtered"),
        ({**base, "surprise": "1"}, "surprise"),
        ({**base, "cursor": tampered}, "cursor"),
        ({**base, "cursor": "not-a-cursor"}, "cursor"),
        ({**base, "cursor": "%%%"}, "cursor"),
        # A genuine cursor is bound to its filters and user.
        ({**base, "cursor": cursor, "token": "USDC"}, "cursor"),
        ({**base, "cursor": cursor, "include_filtered": "true"}, "cursor"),
    ]
    for params, field in bad:
        status, body = await caller.get("/v1/transactions", params)
        assert status == 400, params
        assert body["error"]["code"] == "ERR_VALIDATION", params
        assert field in body["error"]["details"], (params, body)
    # A repeated parameter is refused too.
    resp = await api.client.get(f"/v1/transactions?user_id={user_id}&limit=1&limit=2",
                                headers=await caller.headers())
    assert resp.status == 400
    # The good forms of each.
    for params in [{"limit": 1}, {"limit": 200}, {"direction": "inbound"}, {"direction": "outbound"},
                   {"classification": "unknown"},
                   {"classification": "wash_trade", "include_filtered": "true"},
                   {"token": "USDT"}, {"from_date": "2025-01-01"}, {"to_date": "2025-01-01T00:01:00+02:00"},
                   {"from_date": "2025-01-01T00:00:00", "to_date": "2025-01-01T00:00:00Z"},
                   {"include_filtered": "true"}, {"include_filtered": "false"}, {"wallet_id": wallet.id},
                   {"cursor": cursor, "limit": 1}]:
        status, body = await caller.get("/v1/transactions", {**base, **params})
        assert status == 200, (params, body)
    # The same cursor with a different limit goes on where the first page stopped.
    rest = await caller.page({**base, "cursor": cursor, "limit": 10})
    assert [t["block_number"] for t in good["transactions"] + rest["transactions"]] == [5, 4, 3, 2, 1]


async def test_tenancy_users_wallets_and_scopes(api):
    user_id = await api.user("acme")
    other_user = await api.user("acme")
    foreign_user = await api.user("globex")
    mine = await add_wallet(api.engine, "acme", user_id, addr(1))
    theirs = await add_wallet(api.engine, "acme", other_user, addr(2))
    foreign = await add_wallet(api.engine, "globex", foreign_user, addr(3))
    gone = await add_wallet(api.engine, "acme", user_id, addr(4))
    await revoke(api.engine, gone)
    caller = Caller(api.client, api.engine)
    assert (await caller.get("/v1/transactions", {"user_id": user_id, "wallet_id": mine.id}))[0] == 200
    for params in [{"user_id": "usr_missing"}, {"user_id": foreign_user},
                   {"user_id": user_id, "wallet_id": theirs.id},
                   {"user_id": user_id, "wallet_id": foreign.id},
                   {"user_id": user_id, "wallet_id": gone.id}, {"user_id": user_id, "wallet_id": "wal_x"}]:
        status, body = await caller.get("/v1/transactions", params)
        assert status == 404, params
        assert body["error"]["code"] == "ERR_NOT_FOUND"
    # Another organisation's key cannot see acme's user, even with a valid cursor-free request.
    status, _ = await Caller(api.client, api.engine, "globex").get("/v1/transactions", {"user_id": user_id})
    assert status == 404
    resp = await api.client.get("/v1/transactions", params={"user_id": user_id})
    assert resp.status == 401
    resp = await api.client.get("/v1/transactions", params={"user_id": user_id},
                                headers=await api.headers("acme", ["write"]))
    assert resp.status == 403
    # The rate-limit class of the spec: per key, transactions_per_key a minute.
    assert resp.headers["X-RateLimit-Limit"] == str(api.settings.api.rate_limits.transactions_per_key)


# --- fields, directions, amounts ------------------------------------------------------------------------

async def test_fields_directions_and_exact_amounts(api):
    user_id = await api.user("acme")
    a = await add_wallet(api.engine, "acme", user_id, addr(1))
    b = await add_wallet(api.engine, "acme", user_id, addr(2))
    stranger, other = addr(50), addr(51)
    rows = [
        transfer(10, 0, stranger, a.address, 1),  # 1 base unit in
        transfer(11, 3, a.address, other, UINT256_MAX, token="USDT"),  # the largest uint256 out
        transfer(12, 1, a.address, b.address, 12_345_678),  # between the user's wallets: listed twice
        transfer(13, 0, a.address, a.address, 10**7),  # to itself: listed once, outbound
        transfer(14, 0, stranger, other, 10**6),  # neither wallet: not listed
        transfer(15, 0, stranger, a.address, 10**6, network="ethereum"),  # a's address on another chain
    ]
    await scenario(api, rows)
    caller = Caller(api.client, api.engine)
    listed = (await caller.page({"user_id": user_id}))["transactions"]
    assert [(t["block_number"], t["wallet_id"], t["direction"]) for t in listed] == [
        (13, a.id, "outbound"),
        *sorted([(12, a.id, "outbound"), (12, b.id, "inbound")], key=lambda x: x[1], reverse=True),
        (11, a.id, "outbound"),
        (10, a.id, "inbound"),
    ]
    first = listed[-1]
    assert first == {
        "id": transaction_id(NETWORK, rows[0]["tx_hash"], 0, a.id),
        "wallet_id": a.id, "user_id": user_id, "tx_hash": rows[0]["tx_hash"], "block_number": 10,
        "block_timestamp": "2025-01-01T00:02:00Z", "direction": "inbound",
        "from_address": to_checksum_address(stranger), "to_address": to_checksum_address(a.address),
        "token": "USDC", "amount": Decimal("0.000001"), "network": NETWORK, "classification": "unknown",
        "fraud_flags": [],
    }
    assert re.fullmatch(r"txn_[0-9a-f]{24}", first["id"])
    huge = listed[-2]
    assert huge["token"] == "USDT"
    assert huge["amount"] == Decimal(UINT256_MAX).scaleb(-6, Context(prec=100))
    assert str(huge["amount"]) == str(UINT256_MAX)[:-6] + "." + str(UINT256_MAX)[-6:]
    between = {t["wallet_id"]: t for t in listed if t["block_number"] == 12}
    assert between[a.id]["amount"] == between[b.id]["amount"] == Decimal("12.345678")
    assert between[a.id]["id"] != between[b.id]["id"]
    assert listed[0]["amount"] == Decimal(10) and "E" not in str(listed[0]["amount"])
    # Ids are stable: the same list again has the same ids.
    again = (await caller.page({"user_id": user_id}))["transactions"]
    assert [t["id"] for t in again] == [t["id"] for t in listed]
    # The raw JSON writes exact numbers (no float rounding, no exponent).
    resp = await api.client.get("/v1/transactions", params={"user_id": user_id},
                                headers=await caller.headers())
    raw = await resp.text()
    assert '"amount":0.000001' in raw and '"amount":10,' in raw
    assert f'"amount":{str(UINT256_MAX)[:-6]}.{str(UINT256_MAX)[-6:]}' in raw


async def test_filters(api):
    user_id = await api.user("acme")
    a = await add_wallet(api.engine, "acme", user_id, addr(1))
    b = await add_wallet(api.engine, "acme", user_id, addr(2))
    x = addr(60)
    day = 24 * 3600 // 12  # blocks per day at 12 s
    rows = [
        transfer(day * 0 + 1, 0, x, a.address, 100, "USDC"),  # 2025-01-01
        transfer(day * 1 + 5, 0, a.address, x, 200, "USDT"),  # 2025-01-02
        transfer(day * 2 + 7, 2, x, b.address, 300, "USDC"),  # 2025-01-03
        transfer(day * 2 + 8, 0, x, a.address, 400, "USDT"),  # 2025-01-03 (wash trade)
        transfer(day * 3 + 1, 1, x, a.address, 500, "USDC"),  # 2025-01-04 (circular)
        transfer(day * 3 + 9, 0, x, a.address, 600, "USDC"),  # 2025-01-04 (verified income)
        transfer(day * 4 + 2, 0, x, b.address, 700, "USDC"),  # 2025-01-05 (p2p)
        transfer(day * 4 + 3, 0, a.address, b.address, 800, "USDC"),  # 2025-01-05 (a wash trade for a only)
    ]
    await scenario(api, rows)
    payroll = {"matched": True, "payroll_period": "2025-01", "origin_platform": "gusto",
               "match_confidence": "exact"}
    await add_labels(api.engine, [
        label(rows[3], a.address, "wash_trade", ["ERR_WASH_TRADE_DETECTED"]),
        label(rows[4], a.address, "circular", ["ERR_CIRCULAR_FLOW"]),
        label(rows[5], a.address, "verified_income", [], payroll),
        label(rows[6], b.address, "p2p"),
        label(rows[7], a.address, "wash_trade", ["ERR_WASH_TRADE_DETECTED"]),
        # A label of another wallet address does not apply to this wallet's view.
        label(rows[0], addr(99), "wash_trade", ["ERR_WASH_TRADE_DETECTED"]),
    ])
    caller = Caller(api.client, api.engine)

    async def amounts(**params) -> list[int]:
        body = await caller.page({"user_id": user_id, **params})
        return [int(t["amount"] * 10**6) for t in body["transactions"]]

    # Wash trades and circular flows are excluded by default; a label is the view of one wallet (800 is
    # a wash trade for a, still listed for b).
    assert await amounts() == [800, 700, 600, 300, 200, 100]
    assert await amounts(include_filtered="true") == [800, 800, 700, 600, 500, 400, 300, 200, 100]
    assert await amounts(direction="outbound") == [200]
    assert await amounts(direction="inbound") == [800, 700, 600, 300, 100]
    assert await amounts(token="USDT") == [200]
    assert await amounts(token="USDT", include_filtered="true") == [400, 200]
    assert await amounts(wallet_id=b.id) == [800, 700, 300]
    assert await amounts(wallet_id=a.id, include_filtered="true") == [800, 600, 500, 400, 200, 100]
    assert await amounts(classification="unknown") == [800, 300, 200, 100]
    assert await amounts(classification="verified_income") == [600]
    assert await amounts(classification="p2p") == [700]
    assert await amounts(classification="dex_trade") == []
    assert await amounts(classification="wash_trade", include_filtered="true") == [800, 400]
    assert await amounts(classification="wash_trade", include_filtered="true", wallet_id=b.id) == []
    assert await amounts(classification="circular", include_filtered="true") == [500]
    # Dates: a date is the whole UTC day, both ends inclusive; date-times are exact instants.
    assert await amounts(from_date="2025-01-03") == [800, 700, 600, 300]
    assert await amounts(to_date="2025-01-02") == [200, 100]
    assert await amounts(from_date="2025-01-02", to_date="2025-01-03") == [300, 200]
    assert await amounts(from_date="2025-01-03", to_date="2025-01-03", include_filtered="true") == [400, 300]
    at = block_time(day * 2 + 7)
    assert await amounts(from_date=at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         to_date=at.strftime("%Y-%m-%dT%H:%M:%SZ")) == [300]
    shifted = at.astimezone(timezone(timedelta(hours=2))).isoformat()
    assert await amounts(from_date=shifted, to_date=shifted) == [300]
    assert await amounts(from_date="2025-01-06") == []
    # Labels: classification, fraud flags, and payroll_match only on verified income.
    body = await caller.page({"user_id": user_id, "include_filtered": "true", "wallet_id": a.id})
    by_amount = {int(t["amount"] * 10**6): t for t in body["transactions"]}
    assert by_amount[400]["classification"] == "wash_trade"
    assert by_amount[400]["fraud_flags"] == ["ERR_WASH_TRADE_DETECTED"]
    assert by_amount[500]["fraud_flags"] == ["ERR_CIRCULAR_FLOW"]
    assert by_amount[600]["classification"] == "verified_income"
    assert by_amount[600]["payroll_match"] == payroll
    assert all("payroll_match" not in t for t in body["transactions"]
               if t["classification"] != "verified_income")
    assert by_amount[100]["classification"] == "unknown" and by_amount[100]["fraud_flags"] == []


async def test_revoked_wallet_is_no_longer_listed(api):
    user_id = await api.user("acme")
    a = await add_wallet(api.engine, "acme", user_id, addr(1))
    b = await add_wallet(api.engine, "acme", user_id, addr(2))
    await scenario(api, [transfer(1, 0, addr(70), a.address, 1), transfer(2, 0, addr(70), b.address, 2),
                         transfer(3, 0, a.address, b.address, 3)])
    caller = Caller(api.client, api.engine)
    before = (await caller.page({"user_id": user_id}))["transactions"]
    assert {t["wallet_id"] for t in before} == {a.id, b.id} and len(before) == 4
    await revoke(api.engine, a)
    after = (await caller.page({"user_id": user_id}))["transactions"]
    assert [(t["block_number"], t["wallet_id"], t["direction"]) for t in after] == [
        (3, b.id, "inbound"), (2, b.id, "inbound")]
    # Reconnecting the same address makes a new wallet; its history is listed under it.
    again = await add_wallet(api.engine, "acme", user_id, a.address)
    relisted = (await caller.page({"user_id": user_id, "wallet_id": again.id}))["transactions"]
    assert [t["block_number"] for t in relisted] == [3, 1]


# --- pagination ------------------------------------------------------------------------------------------

def busy_history(rng: random.Random, wallets_: list[Wallet], blocks: range, others: list[str]) -> list[dict]:
    """Several logs per block, both tokens and directions, transfers between the user's wallets."""
    rows = []
    for block in blocks:
        for log_index in rng.sample(range(40), rng.randint(1, 4)):
            w = rng.choice(wallets_)
            peer = rng.choice([*others, *(x.address for x in wallets_ if x is not w)])
            frm, to = (w.address, peer) if rng.random() < 0.5 else (peer, w.address)
            token = rng.choice(["USDC", "USDT"])
            rows.append(transfer(block, log_index, frm, to, rng.randint(1, 10**12), token))
    return rows


async def test_pagination_walks_every_row_exactly_once(api):
    rng = random.Random(1)
    user_id = await api.user("acme")
    ws = [await add_wallet(api.engine, "acme", user_id, addr(i)) for i in range(1, 4)]
    rows = busy_history(rng, ws, range(100, 135), [addr(80), addr(81)])
    await scenario(api, rows)
    caller = Caller(api.client, api.engine)
    everything = (await caller.page({"user_id": user_id, "limit": 200}))["transactions"]
    mine = {w.address for w in ws}
    expected = sum((r["from_address"] in mine) + (r["to_address"] in mine) for r in rows)
    assert len(everything) == expected < 200
    for limit in (1, 7, 50):
        walked = await caller.walk({"user_id": user_id}, limit)
        assert [t["id"] for t in walked] == [t["id"] for t in everything], limit
    assert len({t["id"] for t in everything}) == len(everything)
    order = [(t["block_number"], LOG_INDEX[t["tx_hash"]], t["wallet_id"]) for t in everything]
    assert order == sorted(order, reverse=True)
    # With filters too, including a labelled class (the walk is driven by the labels then).
    inbound = (await caller.page({"user_id": user_id, "limit": 200, "direction": "inbound", "token": "USDT"}))
    walked = await caller.walk({"user_id": user_id, "direction": "inbound", "token": "USDT"}, 5)
    assert [t["id"] for t in walked] == [t["id"] for t in inbound["transactions"]]
    labelled = [label(r, w.address, "p2p") for r in rows[::3] for w in ws
                if w.address in (r["from_address"], r["to_address"])]
    await add_labels(api.engine, labelled)
    p2p = (await caller.page({"user_id": user_id, "limit": 200, "classification": "p2p"}))["transactions"]
    assert len(p2p) == len(labelled) > 10
    assert [t["id"] for t in p2p] == [t["id"] for t in everything if t["tx_hash"] in
                                      {r["tx_hash"] for r in rows[::3]}]
    walked = await caller.walk({"user_id": user_id, "classification": "p2p"}, 4)
    assert [t["id"] for t in walked] == [t["id"] for t in p2p]


async def test_pagination_stays_exact_while_transfers_arrive(api):
    rng = random.Random(2)
    user_id = await api.user("acme")
    ws = [await add_wallet(api.engine, "acme", user_id, addr(i)) for i in range(1, 3)]
    await scenario(api, busy_history(rng, ws, range(1000, 1040), [addr(90)]))
    caller = Caller(api.client, api.engine)
    snapshot = (await caller.page({"user_id": user_id, "limit": 200}))["transactions"]
    head = [1040]

    async def new_blocks(page: int) -> None:
        # New blocks at the head (several logs each, some between the two wallets), and, once, a late
        # backfilled transfer deep below the pages already read.
        rows = busy_history(rng, ws, range(head[0], head[0] + 2), [addr(91)])
        if page == 3:
            rows.append(transfer(999, 5, addr(92), ws[0].address, 77))
        head[0] += 2
        await scenario(api, rows)

    walked = await caller.walk({"user_id": user_id}, 6, between=new_blocks)
    ids = [t["id"] for t in walked]
    assert len(ids) == len(set(ids))  # nothing repeated
    old = [t for t in walked if t["block_number"] < 1040 and t["block_number"] != 999]
    assert [t["id"] for t in old] == [t["id"] for t in snapshot]  # nothing skipped, same order
    assert all(t["block_number"] < 1040 for t in walked)  # rows above the first page's start come later
    assert any(t["block_number"] == 999 for t in walked)  # a row inserted below the cursor is reached
    # A new first page shows the new head.
    top = (await caller.page({"user_id": user_id, "limit": 1}))["transactions"][0]
    assert top["block_number"] == head[0] - 1


async def test_query_plan_reads_one_page_per_side(api):
    """On a deep page of a wallet with 20,000 transfers, the query reads about `limit` rows per side via the
    address indexes (keyset predicate inside each side), not the wallet's whole history."""
    user_id = await api.user("acme")
    w = await add_wallet(api.engine, "acme", user_id, addr(1))
    async with api.engine.begin() as conn:
        await conn.execute(text("""
            INSERT INTO token_transfers (network, tx_hash, log_index, block_number, block_hash,
                block_timestamp, token, token_address, from_address, to_address, amount)
            SELECT 'local', '0x' || md5(g::text) || md5((g + 1)::text), g % 3, 1000 + g,
                   '0x' || md5(g::text), timestamptz '2025-01-01' + g * interval '12 seconds',
                   CASE WHEN g % 2 = 0 THEN 'USDC' ELSE 'USDT' END,
                   '0x' || repeat('a', 40),
                   CASE WHEN g % 3 = 0 THEN :w ELSE '0x' || lpad(to_hex(g), 40, '0') END,
                   CASE WHEN g % 3 = 0 THEN '0x' || lpad(to_hex(g), 40, '0') ELSE :w END, g
            FROM generate_series(1, 20000) AS g
            """), {"w": w.address})
        await conn.execute(text("ANALYZE token_transfers"))
    caller = Caller(api.client, api.engine)
    body = await caller.page({"user_id": user_id, "limit": 50})
    for _ in range(3):
        body = await caller.page({"user_id": user_id, "limit": 50, "cursor": body["pagination"]["cursor"]})
    last = body["transactions"][-1]
    organisation = await org_id(api.engine, "acme")

    def at(g: int) -> datetime:
        return datetime(2025, 1, 1, tzinfo=UTC) + g * timedelta(seconds=12)

    cases = [
        # A deep page.
        (Filters(user_id=user_id), Position(last["block_number"], 0, last["wallet_id"])),
        # The first page of a window that ends far back, and the page that reaches a window's start: the
        # date bounds are block bounds of the index scans too.
        (Filters(user_id=user_id, until=at(5000)), None),
        (Filters(user_id=user_id, since=at(10000), until=at(15000)), Position(1000 + 10030, 0, w.id)),
        (Filters(user_id=user_id, token="USDT", include_filtered=True, direction="inbound"), None),
    ]
    for filters, position in cases:
        statement, params = transactions_query(organisation, filters, position, 51)
        async with api.engine.connect() as conn:
            compiled = statement.params(params).compile(conn.sync_connection,
                                                        compile_kwargs={"literal_binds": True})
            plan = (await conn.execute(text(f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}"))).scalar()
        scans = list(_nodes(plan[0]["Plan"]))
        on_transfers = [n for n in scans if n.get("Relation Name") == "token_transfers"]
        assert on_transfers, scans
        assert all(n["Node Type"] in ("Index Scan", "Index Only Scan") for n in on_transfers), scans
        used = {n["Index Name"] for n in on_transfers}
        assert used <= {"ix_token_transfers_network_to_address_block_number_log_index",
                        "ix_token_transfers_network_from_address_block_number_log_index"}, used
        assert all(n["Actual Rows"] * n["Actual Loops"] <= 60 for n in on_transfers), (filters, on_transfers)


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


# --- end to end with the real indexer ---------------------------------------------------------------------

def mined(chain: ChainDriver, tx: str) -> None:
    """Wait for the receipt: an automined transaction may still be pending when its hash comes back."""
    chain.w3.eth.wait_for_transaction_receipt(tx, timeout=30)


async def test_end_to_end_with_the_indexer(chain: ChainDriver, database_url, engine, aiohttp_client):
    network = local_network(chain.node.rpc_url, chain.node.chain_id, chain.contracts)
    settings = indexer_settings(network)
    client = await aiohttp_client(create_app(settings, database_url))
    caller = Caller(client, engine, scopes=["read", "write"])
    resp = await client.post("/v1/users", json={}, headers=await caller.headers())
    user_id = (await resp.json())["user"]["id"]
    alice, bob, carol = chain.accounts[2], chain.accounts[3], chain.accounts[4]
    wa = await add_wallet(engine, "acme", user_id, alice)
    wb = await add_wallet(engine, "acme", user_id, bob)
    async with engine.begin() as conn:
        for address in (alice, bob):
            await store.add_watched_address(conn, NETWORK, address, "wallet", start_block=0)
    chain.fund([alice, bob, carol], 10**12)
    chain.transfer("USDC", carol, alice, 1)
    chain.transfer("USDT", alice, bob, 2_500_000)
    mined(chain, chain.transfer("USDC", alice, carol, 10**9))
    async with running_indexer(settings, database_url):
        await wait_synced(engine, chain, NETWORK)
        listed = await caller.walk({"user_id": user_id}, 2)
        mined(chain, chain.transfer("USDC", carol, bob, 42))
        await wait_synced(engine, chain, NETWORK)
        newest = (await caller.page({"user_id": user_id, "limit": 1}))["transactions"][0]
    truth = [r for r in chain.token_logs({alice, bob}) if r.kind == "transfer"]
    expected = set()
    for r in truth:
        for w in (wa, wb):
            if w.address == r.party_b and r.party_a != w.address:
                expected.add((r.tx_hash, w.id, "inbound", r.amount))
            if w.address == r.party_a:
                expected.add((r.tx_hash, w.id, "outbound", r.amount))
    got = {(t["tx_hash"], t["wallet_id"], t["direction"], int(t["amount"] * 10**6)) for t in listed}
    assert got == {e for e in expected if e[3] != 42}
    assert (newest["wallet_id"], newest["direction"]) == (wb.id, "inbound")
    assert newest["amount"] == Decimal("0.000042")
    assert newest["from_address"] == to_checksum_address(carol)
    one = [t for t in listed if t["amount"] == Decimal("0.000001")]
    assert len(one) == 1 and one[0]["direction"] == "inbound" and one[0]["wallet_id"] == wa.id
