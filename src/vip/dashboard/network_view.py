"""What the networks page shows an operator: per network how far the indexer is behind the chain, what it
holds as final, its reorgs and backfills; and how long the organisation's jobs have waited in the daemon's
queues. The figures the daemon exports as Prometheus metrics, read where the daemon leaves them, in
PostgreSQL: the API process runs no indexer, so its own metrics registry has none of them (decision 206).
The networks are every organisation's (chain facts); the queues are counted for the operator's own
organisation only, never another lender's activity (decision 206).

The chain's head is the one figure the database does not hold: it is asked of each network's RPC
(`eth_getBlockByNumber("latest")`, one call per network and page view, 3 s at most); without an answer the
page says why and shows the indexed block's age instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.config import NetworkConfig, Settings
from vip.indexer import store as indexer_store
from vip.payments import rules
from vip.store.tables import (
    block_headers,
    chain_cursors,
    chain_reorgs,
    charges,
    labelling_queue,
    outbox_events,
    payment_intents,
    users,
    watched_addresses,
    webhook_deliveries,
    webhook_endpoints,
)
from vip.store.tables import vip_reports as vip_reports_table

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


async def _size_and_oldest(conn: AsyncConnection, stamp: ColumnElement[datetime], query: Select[Any]
                           ) -> tuple[int, datetime | None]:
    row = (await conn.execute(query.with_only_columns(func.count(), func.min(stamp)))).one()
    return int(row[0]), row[1]


async def _queues(conn: AsyncConnection, organisation_id: str, now: datetime, wall_now: datetime
                  ) -> list[Queue]:
    """Each queue's jobs of the organisation: how many, and how long the oldest has waited (on the clock
    the queue's own gauge uses: the service clock, the wall clock for charges and labels)."""
    v, lq, pi, ch, d, ev = (vip_reports_table, labelling_queue, payment_intents, charges, webhook_deliveries,
                            outbox_events)
    queues = []
    count, oldest = await _size_and_oldest(conn, v.c.requested_at, select(v).where(
        v.c.organisation_id == organisation_id, v.c.status == "pending"))
    queues.append(Queue("vip_report", "VIP reports being generated", count, _age(now, oldest)))
    count, oldest = await _size_and_oldest(conn, lq.c.queued_at, select(lq).join(
        users, users.c.id == lq.c.user_id).where(users.c.organisation_id == organisation_id))
    queues.append(Queue("labels", "users whose transfers wait to be labelled", count, _age(wall_now, oldest)))
    count, oldest = await _size_and_oldest(conn, pi.c.created_at, select(pi).where(
        pi.c.organisation_id == organisation_id, pi.c.status == rules.PENDING_APPROVAL))
    queues.append(Queue("approval_confirmation", "payment intents waiting for their approval to be final",
                        count, _age(now, oldest)))
    count, oldest = await _size_and_oldest(conn, ch.c.requested_at, select(ch).where(
        ch.c.organisation_id == organisation_id, ch.c.status == rules.CHARGE_PENDING))
    queues.append(Queue("charge_completion", "charges being paid", count, _age(wall_now, oldest)))
    # An event waits until it is fanned out to the endpoints, then while a delivery of it is due.
    not_fanned, first = await _size_and_oldest(conn, ev.c.created_at, select(ev).where(
        ev.c.organisation_id == organisation_id, ev.c.fanned_out_at.is_(None)))
    due, fanned = await _size_and_oldest(conn, d.c.created_at, select(d).join(
        webhook_endpoints, webhook_endpoints.c.id == d.c.endpoint_id).where(
        webhook_endpoints.c.organisation_id == organisation_id, d.c.status == "pending"))
    oldest = min((t for t in (first, fanned) if t is not None), default=None)
    queues.append(Queue("webhooks", "events not yet delivered to your endpoints", not_fanned + due,
                        _age(now, oldest)))
    return queues


async def networks_view(engine: AsyncEngine, settings: Settings, organisation_id: str, now: datetime,
                        heads: Mapping[str, Head | str]) -> NetworksView:
    """The networks (shared by every organisation: chain facts) and the organisation's own queues."""
    async with engine.connect() as conn:
        wall_now = await conn.scalar(select(func.now()))
        assert wall_now is not None
        networks = await _per_network(conn, settings, heads)
        reorgs = await _recent_reorgs(conn, RECENT_REORGS)
        queues = await _queues(conn, organisation_id, now, wall_now)
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

