"""What the verification of one user reads and writes: its wallets, income records, the final transfers
of the window (its own and its counterparties'), balances; and the labels it writes back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import and_, func, or_, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.config import NetworkConfig, PlatformConfig, Settings
from vip.indexer import store as indexer_store
from vip.indexer.store import add_watched_address
from vip.store.tables import (
    address_balances,
    connections,
    income_records,
    token_transfers,
    transfer_labels,
    wallets,
    watched_addresses,
)
from vip.verification.model import IncomeRecord, Label, Transfer, TransferKey
from vip.verification.pipeline import Platform, Wallet


async def active_wallets(conn: AsyncConnection, user_id: str) -> list[Wallet]:
    rows = await conn.execute(
        select(wallets.c.id, wallets.c.address, wallets.c.network)
        .join(connections, connections.c.id == wallets.c.connection_id)
        .where(wallets.c.user_id == user_id, connections.c.status == "active")
        .order_by(wallets.c.created_at, wallets.c.id))
    return [Wallet(r.id, r.address, r.network) for r in rows]


async def has_active_platform(conn: AsyncConnection, user_id: str) -> bool:
    found = await conn.scalar(select(connections.c.id).where(
        connections.c.user_id == user_id, connections.c.type == "platform",
        connections.c.status == "active").limit(1))
    return found is not None


async def income_inputs(conn: AsyncConnection, user_id: str, registry: Mapping[str, PlatformConfig],
                        since: datetime | None = None, until: datetime | None = None
                        ) -> tuple[list[IncomeRecord], list[Platform]]:
    """Inbound records of the user's active platform connections dated in [since, until) (None: no
    bound), and those platforms (whitelists from the configured registry; a pushed platform not configured
    has none)."""
    joined = [income_records.c.connection_id == connections.c.id, income_records.c.direction == "inbound"]
    if since is not None:
        joined.append(income_records.c.record_date >= since.date())
    if until is not None:
        joined.append(income_records.c.record_date < until.date())
    rows = (await conn.execute(
        select(connections.c.id, connections.c.provider, connections.c.source_type,
               income_records.c.record_date, income_records.c.amount, income_records.c.from_reference)
        .select_from(connections.outerjoin(income_records, and_(*joined)))
        .where(connections.c.user_id == user_id, connections.c.type == "platform",
               connections.c.status == "active")
        .order_by(connections.c.created_at, income_records.c.record_date))).all()
    platforms: dict[str, Platform] = {}
    records = []
    for r in rows:
        configured = registry.get(r.provider)
        whitelist = frozenset(configured.whitelisted_addresses) if configured else frozenset()
        platforms.setdefault(r.provider, Platform(r.provider, r.source_type or "payroll", whitelist))
        if r.record_date is not None:
            reference = r.from_reference.lower() if r.from_reference else None
            records.append(IncomeRecord(r.provider, r.source_type or "payroll", r.record_date,
                                        Decimal(r.amount), reference, whitelist))
    return records, list(platforms.values())


async def final_blocks(conn: AsyncConnection, settings: Settings, networks: Iterable[str]) -> dict[str, int]:
    """Per configured network, its final block (vip.indexer.store.final_blocks, the one rule for every
    consequence): verification reads only transfers at or below it."""
    return await indexer_store.final_blocks(
        conn, [settings.networks[n] for n in networks if n in settings.networks])


_COLUMNS = ("network, tx_hash, log_index, block_number, block_timestamp, token, from_address, to_address,"
            " amount")


def _transfer(row: Sequence[Any], decimals: int = 6) -> Transfer:
    """A row of `_COLUMNS`, in that order (unpacked: a VIP converts tens of thousands of rows)."""
    network, tx_hash, log_index, block_number, stamp, token, from_address, to_address, amount = row
    return Transfer(network, tx_hash, log_index, block_number, stamp.astimezone(UTC), token, from_address,
                    to_address, int(amount), decimals)


# Two index scans (sender, recipient) of the listed addresses' final transfers from `since`.
_TOUCHING = [f"""
SELECT {_COLUMNS} FROM token_transfers
WHERE network = %(network)s AND {side} = ANY(%(addresses)s) AND block_number <= %(final)s
  AND block_timestamp >= %(since)s
""" for side in ("from_address", "to_address")]


async def transfers_touching(conn: AsyncConnection, network: str, addresses: Sequence[str], since: datetime,
                             up_to_block: int) -> list[Transfer]:
    """Final transfers of the network from `since` with any of `addresses` on either side, in chain order."""
    if not addresses:
        return []
    # Read through the driver's cursor: rows as plain tuples (a VIP reads tens of thousands; SQLAlchemy's
    # rows cost as much again as the conversion).
    pg = cast(psycopg.AsyncConnection[Any], (await conn.get_raw_connection()).driver_connection)
    params = {"network": network, "addresses": list(addresses), "final": up_to_block, "since": since}
    seen: set[TransferKey] = set()
    out = []
    async with pg.cursor() as cur:
        for query in _TOUCHING:
            await cur.execute(query, params)
            for row in await cur.fetchall():
                transfer = _transfer(row)
                if transfer.key not in seen:  # a transfer between two listed addresses is kept once
                    seen.add(transfer.key)
                    out.append(transfer)
    out.sort(key=lambda x: x.order)
    return out


# Per address, its latest inflows from `since` (newest first), one backward index range each.
_LATEST_INFLOWS = f"""
SELECT w.* FROM unnest(CAST(:addresses AS text[])) AS a(address)
CROSS JOIN LATERAL (
  SELECT {_COLUMNS} FROM token_transfers t
  WHERE t.network = :network AND t.to_address = a.address AND t.block_number <= :final
    AND t.block_timestamp >= :since
  ORDER BY t.block_number DESC, t.log_index DESC LIMIT :limit) w
"""

# Around each payment (block, log index) out of an address: its last `depth` inflows before the payment, and
# its payments from the block of the earliest of them up to the payment (what took from those inflows).
_WINDOWS = f"""
WITH p(b, l) AS (SELECT * FROM unnest(CAST(:blocks AS bigint[]), CAST(:logs AS int[]))),
inflows AS (
  SELECT p.b AS pb, p.l AS pl, w.* FROM p CROSS JOIN LATERAL (
    SELECT {_COLUMNS} FROM token_transfers t
    WHERE t.network = :network AND t.to_address = :address AND t.block_timestamp >= :since
      AND (t.block_number, t.log_index) < (p.b, p.l)
    ORDER BY t.block_number DESC, t.log_index DESC LIMIT :depth) w),
starts AS (SELECT pb, pl, min(block_number) AS sb FROM inflows GROUP BY pb, pl)
SELECT {_COLUMNS} FROM inflows
UNION
SELECT o.* FROM starts CROSS JOIN LATERAL (
  SELECT {_COLUMNS} FROM token_transfers t
  WHERE t.network = :network AND t.from_address = :address AND t.block_timestamp >= :since
    AND (t.block_number, t.log_index) >= (starts.sb, 0)
    AND (t.block_number, t.log_index) < (starts.pb, starts.pl)
  OFFSET 0) o  -- kept a lateral (not flattened into a join): one index range per window, not every payment
"""


# The addresses among a list with at least `limit` inflows (an index-only count, stopped at `limit`).
_BUSY_RECEIVERS = """
SELECT a.address FROM unnest(CAST(:addresses AS text[])) AS a(address)
WHERE (SELECT count(*) FROM (
         SELECT 1 FROM token_transfers t
         WHERE t.network = :network AND t.to_address = a.address AND t.block_number <= :final
         LIMIT :limit) x) >= :limit
"""


async def busy_receivers(conn: AsyncConnection, network: str, addresses: Sequence[str], up_to_block: int,
                         limit: int) -> set[str]:
    """Those of `addresses` with at least `limit` final inflows, however old."""
    if not addresses:
        return set()
    rows = await conn.execute(text(_BUSY_RECEIVERS), {
        "addresses": list(addresses), "network": network, "final": up_to_block, "limit": limit})
    return {r.address for r in rows}


# Which of `senders` paid each of a list of addresses: one index range of inflows per address (the callers'
# addresses are quiet ones). The senders are matched outside the lateral (`OFFSET 0` keeps it one): given
# both lists, the planner read the senders' outflows instead, and among them are exchanges' hot wallets
# (38,275 rows and 35,254 heap pages for 191 pairs at 10M transfers: 128 ms, against 10 ms; decision 361).
_PAID_BY = """
SELECT DISTINCT w.sender, a.address AS receiver
FROM unnest(CAST(:addresses AS text[])) AS a(address)
CROSS JOIN LATERAL (
  SELECT t.from_address AS sender FROM token_transfers t
  WHERE t.network = :network AND t.to_address = a.address AND t.block_number <= :final
    AND t.block_timestamp >= :since
  OFFSET 0) w
WHERE w.sender = ANY(CAST(:senders AS text[]))
"""

# Which of `receivers` an address paid while one of the given inflows of it (block, log index) was among its
# last `depth` inflows: after the inflow, before the `depth`-th inflow after it.
_PAID_WHILE_RECENT = """
WITH d(b, l) AS (SELECT * FROM unnest(CAST(:blocks AS bigint[]), CAST(:logs AS int[]))),
w AS (
  SELECT d.b, d.l, coalesce(e.b, :final + 1) AS eb, coalesce(e.l, 0) AS el
  FROM d LEFT JOIN LATERAL (
    SELECT t.block_number AS b, t.log_index AS l FROM token_transfers t
    WHERE t.network = :network AND t.to_address = :address AND (t.block_number, t.log_index) > (d.b, d.l)
      AND t.block_number <= :final
    ORDER BY t.block_number, t.log_index OFFSET :depth - 1 LIMIT 1) e ON true)
SELECT DISTINCT o.receiver FROM w CROSS JOIN LATERAL (
  SELECT t.to_address AS receiver FROM token_transfers t
  WHERE t.network = :network AND t.from_address = :address AND t.to_address = ANY(CAST(:receivers AS text[]))
    AND (t.block_number, t.log_index) > (w.b, w.l) AND (t.block_number, t.log_index) < (w.eb, w.el)
  OFFSET 0) o  -- kept a lateral: one index range per window
"""


async def paid_by(conn: AsyncConnection, network: str, addresses: Sequence[str], senders: Sequence[str],
                  since: datetime, up_to_block: int) -> set[tuple[str, str]]:
    """(sender, receiver) for each of `addresses` that received a final transfer from `since` from one of
    `senders`."""
    if not addresses or not senders:
        return set()
    rows = await conn.execute(text(_PAID_BY), {
        "addresses": list(addresses), "senders": list(senders), "network": network, "final": up_to_block,
        "since": since})
    return {(r.sender, r.receiver) for r in rows}


async def paid_while_recent(conn: AsyncConnection, network: str, address: str, inflows: Sequence[Transfer],
                            receivers: Sequence[str], depth: int, up_to_block: int) -> set[str]:
    """Those of `receivers` that `address` paid while one of `inflows` (into it) was among its last `depth`
    inflows: the only payments of an omnibus that inflow can have funded (decision 356)."""
    if not inflows or not receivers:
        return set()
    rows = await conn.execute(text(_PAID_WHILE_RECENT), {
        "blocks": [t.block_number for t in inflows], "logs": [t.log_index for t in inflows],
        "network": network, "address": address, "receivers": list(receivers), "depth": depth,
        "final": up_to_block})
    return {r.receiver for r in rows}


async def latest_inflows(conn: AsyncConnection, network: str, addresses: Sequence[str], since: datetime,
                         up_to_block: int, limit: int) -> dict[str, list[Transfer]]:
    """Per address, its latest `limit` final inflows from `since`, newest first."""
    found: dict[str, list[Transfer]] = {a: [] for a in addresses}
    if addresses:
        rows = await conn.execute(text(_LATEST_INFLOWS), {
            "addresses": list(addresses), "network": network, "final": up_to_block, "since": since,
            "limit": limit})
        for row in rows:
            found[row.to_address].append(_transfer(row))
    return found


async def windows_before(conn: AsyncConnection, network: str, address: str, payments: Sequence[Transfer],
                         since: datetime, depth: int) -> list[Transfer]:
    """An omnibus address's transfers around each of its `payments`: its last `depth` inflows from `since`
    before each, and its payments between the earliest of those and it (chain order)."""
    if not payments:
        return []
    rows = await conn.execute(text(_WINDOWS), {
        "blocks": [p.block_number for p in payments], "logs": [p.log_index for p in payments],
        "network": network, "address": address, "since": since, "depth": depth})
    return sorted(map(_transfer, rows), key=lambda x: x.order)


def payers(transfers: Iterable[Transfer], to: set[str], excluded: set[str]) -> list[str]:
    """The addresses that paid into `to` (most frequent first, then by address), never `excluded`."""
    counts: Counter[str] = Counter()
    for t in transfers:
        if t.to_address in to and t.from_address not in excluded:
            counts[t.from_address] += 1
    return [address for address, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


async def watch_from(conn: AsyncConnection, network: str, addresses: Sequence[str], since: datetime) -> int:
    """Ask the indexer for the history from `since` of those of `addresses` it does not hold from then: a
    backfill of each it does not watch yet, and of the part before its start of each watched from a later
    time (another user's wallet, a counterparty of a shorter VIP). Returns how many. One watched from a
    block (the operator's choice) is used as it is."""
    if not addresses:
        return 0
    starts = {r.address: r.start_time for r in await conn.execute(
        select(watched_addresses.c.address, watched_addresses.c.start_time).where(
            watched_addresses.c.network == network, watched_addresses.c.address.in_(list(addresses))))}
    asked = 0
    for address in addresses:
        start = starts.get(address, since)
        if address not in starts or (start is not None and start > since):
            await add_watched_address(conn, network, address, "counterparty", start_time=since)
            asked += 1
    return asked


async def backfilled(conn: AsyncConnection, network: str, addresses: Sequence[str],
                     since: datetime) -> set[str]:
    """Those of `addresses` whose history from `since` is backfilled."""
    if not addresses:
        return set()
    w = watched_addresses
    return set(await conn.scalars(select(w.c.address).where(
        w.c.network == network, w.c.address.in_(list(addresses)), w.c.backfill_done_at.is_not(None),
        or_(w.c.start_time.is_(None), w.c.start_time <= since))))


async def pending_backfills(conn: AsyncConnection, network: str, addresses: Sequence[str]) -> int:
    """How many of `addresses` (wallets or counterparties) still have history being backfilled."""
    if not addresses:
        return 0
    return await conn.scalar(select(func.count()).select_from(watched_addresses).where(
        watched_addresses.c.network == network, watched_addresses.c.address.in_(list(addresses)),
        watched_addresses.c.backfill_done_at.is_(None))) or 0


async def opening_balances(conn: AsyncConnection, network: NetworkConfig, addresses: Sequence[str],
                           since: datetime) -> dict[str, int]:
    """What each of `addresses` held when the history read from `since` begins, in 10^-18 USD (USDC and USDT
    count one USD per token), where the indexer has read its balances: each token's balance less what the
    stored transfers from `since` up to that balance's block added. The funding trace counts it as money of
    unknown origin, never the user's. An address without balances is left out (the trace then assumes the
    least that covers its payments)."""
    if not addresses:
        return {}
    b, t = address_balances, token_transfers
    moved = [t.c.network == b.c.network, t.c.token == b.c.token, t.c.block_timestamp >= since,
             t.c.block_number <= b.c.block_number]
    received = select(func.coalesce(func.sum(t.c.amount), 0)).where(
        *moved, t.c.to_address == b.c.address).scalar_subquery()
    sent = select(func.coalesce(func.sum(t.c.amount), 0)).where(
        *moved, t.c.from_address == b.c.address).scalar_subquery()
    rows = await conn.execute(select(b.c.address, b.c.token, b.c.balance, received.label("received"),
                                     sent.label("sent")).where(
        b.c.network == network.name, b.c.address.in_(list(addresses))))
    openings: dict[str, int] = {}
    for r in rows:
        token = network.tokens.get(r.token)
        if token is None or token.decimals > 18:
            continue
        held = int(r.balance) - int(r.received) + int(r.sent)
        openings[r.address] = openings.get(r.address, 0) + max(held, 0) * 10 ** (18 - token.decimals)
    return openings


async def usdc_balances(conn: AsyncConnection, wallets_: Sequence[Wallet]) -> dict[Wallet, int | None]:
    """The indexer's latest USDC balance of each wallet (None when not read yet)."""
    if not wallets_:
        return {}
    rows = await conn.execute(select(address_balances.c.network, address_balances.c.address,
                                     address_balances.c.balance).where(
        address_balances.c.token == "USDC",
        tuple_(address_balances.c.network, address_balances.c.address).in_(
            [(w.network, w.address) for w in wallets_])))
    found = {(r.network, r.address): int(r.balance) for r in rows}
    return {w: found.get((w.network, w.address)) for w in wallets_}


async def usdc_flows(conn: AsyncConnection, wallet: Wallet,
                     since: datetime | None) -> list[tuple[datetime, int]]:
    """Signed USDC flows of a wallet (all indexed blocks) from `since` (None: its whole indexed history)."""
    t = token_transfers
    conditions = [t.c.network == wallet.network, t.c.token == "USDC",
                  or_(t.c.from_address == wallet.address, t.c.to_address == wallet.address)]
    if since is not None:
        conditions.append(t.c.block_timestamp >= since)
    rows = await conn.execute(select(t.c.block_timestamp, t.c.from_address, t.c.to_address, t.c.amount)
                              .where(*conditions))
    flows = []
    for r in rows:
        if r.from_address == r.to_address:
            continue
        sign = 1 if r.to_address == wallet.address else -1
        flows.append((r.block_timestamp.astimezone(UTC), sign * int(r.amount)))
    return flows


async def existing_flags(conn: AsyncConnection, wallet: Wallet, keys: Sequence[TransferKey]
                         ) -> dict[TransferKey, tuple[str, ...]]:
    if not keys:
        return {}
    lbl = transfer_labels
    rows = await conn.execute(select(lbl.c.tx_hash, lbl.c.log_index, lbl.c.fraud_flags).where(
        lbl.c.network == wallet.network, lbl.c.wallet_address == wallet.address,
        tuple_(lbl.c.tx_hash, lbl.c.log_index).in_([(k[1], k[2]) for k in keys])))
    return {(wallet.network, r.tx_hash, r.log_index): tuple(r.fraud_flags or ()) for r in rows}


async def write_labels(conn: AsyncConnection, wallet: Wallet, labels: Mapping[TransferKey, Label],
                       now: datetime) -> None:
    """Upsert the wallet's labels (a re-run replaces them). COPY into a session-local staging table, then
    one INSERT ... ON CONFLICT: a multi-row VALUES statement of 10,000 labels costs seconds to build."""
    if not labels:
        return
    await conn.execute(text(
        "CREATE TEMP TABLE IF NOT EXISTS transfer_labels_staging "
        "(LIKE transfer_labels INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"))
    raw = cast(psycopg.AsyncConnection[Any], (await conn.get_raw_connection()).driver_connection)
    async with raw.cursor() as cur, cur.copy(
            "COPY transfer_labels_staging (network, tx_hash, log_index, wallet_address, classification, "
            "fraud_flags, payroll_match, labelled_at) FROM STDIN") as copy:
        for key, label in labels.items():
            match = Jsonb(label.payroll_match) if label.payroll_match is not None else None
            await copy.write_row((key[0], key[1], key[2], wallet.address, label.classification,
                                  list(label.fraud_flags), match, now))
    await conn.execute(text(
        "INSERT INTO transfer_labels SELECT * FROM transfer_labels_staging "
        "ON CONFLICT (network, tx_hash, log_index, wallet_address) DO UPDATE SET "
        "classification = excluded.classification, fraud_flags = excluded.fraud_flags, "
        "payroll_match = excluded.payroll_match, labelled_at = excluded.labelled_at"))
    await conn.execute(text("DELETE FROM transfer_labels_staging"))
