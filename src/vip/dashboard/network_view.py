"""What the networks page shows an operator: per network how far the indexer is behind the chain, what it
holds as final, its reorgs and backfills; and how long the daemon's job queues have waited. The figures
the daemon exports as Prometheus metrics, read where the daemon leaves them, in PostgreSQL: the API
process runs no indexer, so its own metrics registry has none of them (decision 206).

The chain's head is the one figure the database does not hold: it is asked of each network's RPC
(`eth_getBlockByNumber("latest")`, one call per network and page view, 3 s at most); without an answer the
page says why and shows the indexed block's age instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import NetworkConfig, Settings
from vip.indexer import store as indexer_store
from vip.payments import rules
from vip.payments import store as payments_store
from vip.reports import vip_reports
from vip.store import label_queue
from vip.store.tables import (
    block_headers,
    chain_cursors,
    chain_reorgs,
    charges,
    labelling_queue,
    outbox_events,
    payment_intents,
    watched_addresses,
    webhook_deliveries,
)
from vip.store.tables import vip_reports as vip_reports_table
from vip.webhooks import claims

HEAD_TIMEOUT_S = 3.0
RECENT_REORGS = 20


@dataclass(frozen=True)
class Head:
    block_number: int
    timestamp: datetime


@dataclass(frozen=True)
class NetworkFigures:
    name: str
    chain_id: int | None
    head: Head | None
    head_problem: str | None  # why the head is unknown
    indexed_block: int | None  # the cursor: last block fully stored (None: never followed)
    indexed_at: datetime | None  # the indexed block's timestamp (from the stored headers)
    cursor_moved_at: datetime | None  # when the cursor last moved
    final_block: int | None
    watched: int
    backfills_pending: int
    oldest_backfill_since: datetime | None
    reorgs: int
    deep_reorgs: int

    @property
    def lag_blocks(self) -> int | None:
        """Head minus indexed block (the metric `vip_indexer_lag_blocks`)."""
        if self.head is None or self.indexed_block is None:
            return None
        return max(0, self.head.block_number - self.indexed_block)

    @property
    def lag_seconds(self) -> int | None:
        """The head's timestamp minus the indexed block's (the metric `vip_indexer_lag_seconds`)."""
        if self.head is None or self.indexed_at is None:
            return None
        return max(0, int((self.head.timestamp - self.indexed_at).total_seconds()))

    @property
    def unfinal_blocks(self) -> int | None:
        """Indexed blocks not final yet: what waits for finality (income, flags, charges)."""
        if self.indexed_block is None or self.final_block is None:
            return None
        return max(0, self.indexed_block - self.final_block)


@dataclass(frozen=True)
class Reorg:
    network: str
    detected_at: datetime
    fork_block: int
    old_head: int
    depth: int
    beyond_finality: bool


@dataclass(frozen=True)
class Queue:
    """One of the daemon's job queues (the metric `vip_jobs_oldest_pending_seconds`, and the webhooks')."""

    name: str
    description: str
    waiting: int
    oldest_age_s: int  # 0 when none waits


@dataclass(frozen=True)
class NetworksView:
    networks: list[NetworkFigures]
    reorgs: list[Reorg]
    queues: list[Queue]
    now: datetime  # the service clock (a local chain's time on a development stack)
    wall_now: datetime  # the database's clock, which stamps the cursor's moves

    @property
    def clocks_differ(self) -> bool:
        return abs((self.now - self.wall_now).total_seconds()) > 60


# --- the chain's head ------------------------------------------------------------------------------------

async def chain_head(http: aiohttp.ClientSession, network: NetworkConfig) -> Head | str:
    """The network's latest block (number and time), or why it could not be read. The URL is never
    repeated: hosted providers put their key in it."""
    payload = {"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["latest", False]}
    try:
        async with http.post(network.rpc_url or "", json=payload,
                             timeout=aiohttp.ClientTimeout(total=HEAD_TIMEOUT_S)) as resp:
            if resp.status != 200:
                return f"HTTP {resp.status}"
            answer = await resp.json(content_type=None)
        block = answer["result"]
        return Head(int(block["number"], 16), datetime.fromtimestamp(int(block["timestamp"], 16), UTC))
    except TimeoutError:
        return f"no answer within {HEAD_TIMEOUT_S:g} s"
    except (aiohttp.ClientError, ValueError) as exc:
        return type(exc).__name__
    except (KeyError, TypeError):
        return "no block in the JSON-RPC answer"


async def chain_heads(http: aiohttp.ClientSession, networks: Sequence[NetworkConfig]
                      ) -> dict[str, Head | str]:
    found = await asyncio.gather(*(chain_head(http, n) for n in networks))
    return {n.name: head for n, head in zip(networks, found, strict=True)}


# --- the database's figures ---------------------------------------------------------------------------

async def _per_network(conn: AsyncConnection, settings: Settings, heads: Mapping[str, Head | str]
                       ) -> list[NetworkFigures]:
    cursors = {r.network: r for r in await conn.execute(select(chain_cursors))}
    configured = {n.name: n for n in settings.networks.values()}
    followed = [configured[name] for name in cursors if name in configured]
    finals = await indexer_store.final_blocks(conn, followed)
    stamps = {r.network: r.block_timestamp for r in await conn.execute(
        select(block_headers.c.network, block_headers.c.block_timestamp)
        .join(chain_cursors, (chain_cursors.c.network == block_headers.c.network)
              & (chain_cursors.c.block_number == block_headers.c.block_number)))}
    w = watched_addresses
    watch = {r.network: r for r in await conn.execute(
        select(w.c.network, func.count().label("watched"),
               func.count().filter(w.c.backfill_done_at.is_(None)).label("pending"),
               func.min(w.c.created_at).filter(w.c.backfill_done_at.is_(None)).label("oldest"))
        .group_by(w.c.network))}
    reorgs = {r.network: r for r in await conn.execute(
        select(chain_reorgs.c.network, func.count().label("all"),
               func.count().filter(chain_reorgs.c.beyond_finality == 1).label("deep"))
        .group_by(chain_reorgs.c.network))}
    names = sorted({n.name for n in settings.enabled_networks()} | set(cursors))
    out = []
    for name in names:
        cursor, seen, repaired = cursors.get(name), watch.get(name), reorgs.get(name)
        head = heads.get(name)
        config = configured.get(name)
        out.append(NetworkFigures(
            name=name, chain_id=cursor.chain_id if cursor else (config.chain_id if config else None),
            head=head if isinstance(head, Head) else None,
            head_problem=head if isinstance(head, str) else (None if head else "no RPC configured"),
            indexed_block=cursor.block_number if cursor else None, indexed_at=stamps.get(name),
            cursor_moved_at=cursor.updated_at if cursor else None, final_block=finals.get(name),
            watched=seen.watched if seen else 0, backfills_pending=seen.pending if seen else 0,
            oldest_backfill_since=seen.oldest if seen else None,
            reorgs=repaired.all if repaired else 0, deep_reorgs=repaired.deep if repaired else 0))
    return out


async def _recent_reorgs(conn: AsyncConnection, limit: int) -> list[Reorg]:
    r = chain_reorgs
    rows = await conn.execute(select(r).order_by(r.c.detected_at.desc(), r.c.id.desc()).limit(limit))
    return [Reorg(x.network, x.detected_at, x.fork_block_number, x.old_head_number, x.depth,
                  bool(x.beyond_finality)) for x in rows]


def _age(now: datetime, since: datetime | None) -> int:
    return max(0, int((now - since).total_seconds())) if since is not None else 0


async def _queues(engine: AsyncEngine, conn: AsyncConnection, now: datetime) -> list[Queue]:
    """Each queue's size and the age of its oldest job, by the same functions the daemon's gauges use."""
    pending_vips = await conn.scalar(select(func.count()).select_from(vip_reports_table)
                                     .where(vip_reports_table.c.status == "pending")) or 0
    labels_waiting = await conn.scalar(select(func.count()).select_from(labelling_queue)) or 0
    approval = await payments_store.oldest_pending_approval(conn, now)
    charge = await payments_store.oldest_pending_charge(conn)
    webhook = await claims.oldest_undelivered(engine)
    # Charges are stamped by the wall clock (their worker's too); the rest by the service clock.
    wall_now = datetime.now(UTC)
    return [
        Queue("vip_report", "VIP reports being generated", pending_vips,
              int(await vip_reports.oldest_pending_age(conn, now))),
        Queue("labels", "users whose transfers wait to be labelled", labels_waiting,
              int(await label_queue.oldest_pending_age(conn, now))),
        Queue("approval_confirmation", "payment intents waiting for their approval to be final",
              await _count_waiting_approvals(conn), _age(now, approval)),
        Queue("charge_completion", "charges being paid", await _count_pending_charges(conn),
              _age(wall_now, charge)),
        Queue("webhooks", "events with a delivery still due", await _count_undelivered(conn),
              _age(now, webhook)),
    ]


async def _count_waiting_approvals(conn: AsyncConnection) -> int:
    return await conn.scalar(select(func.count()).select_from(payment_intents)
                             .where(payment_intents.c.status == rules.PENDING_APPROVAL)) or 0


async def _count_pending_charges(conn: AsyncConnection) -> int:
    return await conn.scalar(select(func.count()).select_from(charges)
                             .where(charges.c.status == rules.CHARGE_PENDING)) or 0


async def _count_undelivered(conn: AsyncConnection) -> int:
    """Deliveries due, and events not fanned out to their endpoints yet."""
    due = await conn.scalar(select(func.count()).select_from(webhook_deliveries)
                            .where(webhook_deliveries.c.status == "pending")) or 0
    not_fanned = await conn.scalar(select(func.count()).select_from(outbox_events)
                                   .where(outbox_events.c.fanned_out_at.is_(None))) or 0
    return due + not_fanned


async def networks_view(engine: AsyncEngine, settings: Settings, now: datetime,
                        heads: Mapping[str, Head | str]) -> NetworksView:
    async with engine.connect() as conn:
        networks = await _per_network(conn, settings, heads)
        reorgs = await _recent_reorgs(conn, RECENT_REORGS)
        queues = await _queues(engine, conn, now)
        wall_now = await conn.scalar(select(func.now()))
    assert wall_now is not None
    return NetworksView(networks, reorgs, queues, now, wall_now)


def seconds_text(seconds: int | None) -> str:
    """A duration as an operator reads it: 45 s, 12 min 5 s, 3 h 20 min, 2 d 4 h."""
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"

