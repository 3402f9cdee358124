"""Every table of the service, as SQLAlchemy Core `Table`s. Alembic migrations create them.

Conventions: addresses and hashes are lower-case 0x hex text; token amounts are raw base-unit integers in
NUMERIC(78,0) (uint256 fits); logs are keyed on their natural key (network, tx_hash, log_index), never on a
surrogate, so a log written twice (backfill and live follower, or a replay after a crash) is one row.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

UINT256 = Numeric(78, 0)
NOW = text("now()")

# --- chain -------------------------------------------------------------------------------------------

chain_cursors = Table(
    "chain_cursors",
    metadata,
    Column("network", Text, primary_key=True),
    Column("chain_id", BigInteger, nullable=False),
    # Last block whose logs are fully stored; -1 before the first block.
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Text),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=NOW),
)

# Headers of the blocks inside the finality window, to find the fork point of a reorg.
block_headers = Table(
    "block_headers",
    metadata,
    Column("network", Text, nullable=False),
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Text, nullable=False),
    Column("parent_hash", Text, nullable=False),
    Column("block_timestamp", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("network", "block_number"),
)

token_transfers = Table(
    "token_transfers",
    metadata,
    Column("network", Text, nullable=False),
    Column("tx_hash", Text, nullable=False),
    Column("log_index", Integer, nullable=False),
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Text, nullable=False),
    Column("block_timestamp", DateTime(timezone=True), nullable=False),
    Column("token", Text, nullable=False),  # symbol from config, e.g. USDC
    Column("token_address", Text, nullable=False),
    Column("from_address", Text, nullable=False),
    Column("to_address", Text, nullable=False),
    Column("amount", UINT256, nullable=False),
    PrimaryKeyConstraint("network", "tx_hash", "log_index"),
    Index(None, "network", "block_number"),
    Index(None, "network", "from_address", "block_number"),
    Index(None, "network", "to_address", "block_number"),
)

token_approvals = Table(
    "token_approvals",
    metadata,
    Column("network", Text, nullable=False),
    Column("tx_hash", Text, nullable=False),
    Column("log_index", Integer, nullable=False),
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Text, nullable=False),
    Column("block_timestamp", DateTime(timezone=True), nullable=False),
    Column("token", Text, nullable=False),
    Column("token_address", Text, nullable=False),
    Column("owner_address", Text, nullable=False),
    Column("spender_address", Text, nullable=False),
    Column("amount", UINT256, nullable=False),
    PrimaryKeyConstraint("network", "tx_hash", "log_index"),
    Index(None, "network", "block_number"),
    Index(None, "network", "owner_address", "spender_address", "block_number"),
)

# Addresses the indexer follows in `watched` mode, and the backfill of each one's history.
watched_addresses = Table(
    "watched_addresses",
    metadata,
    Column("network", Text, nullable=False),
    Column("address", Text, nullable=False),
    Column("reason", Text, nullable=False),  # wallet | counterparty | spender
    # History starts at this block, or at the first block at/after start_time (resolved by bisection).
    Column("start_block", BigInteger),
    Column("start_time", DateTime(timezone=True)),
    # First block the live follower fetched with this address in its filter (set by the follower).
    Column("live_from_block", BigInteger),
    # Next block the backfill will fetch; the backfill is done when it reaches live_from_block.
    Column("backfill_next_block", BigInteger),
    Column("backfill_done_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    PrimaryKeyConstraint("network", "address"),
)

# Every reorg the indexer repaired, for operators and for consumers that must re-check their work.
chain_reorgs = Table(
    "chain_reorgs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("network", Text, nullable=False),
    Column("detected_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("old_head_number", BigInteger, nullable=False),
    Column("old_head_hash", Text),
    Column("fork_block_number", BigInteger, nullable=False),
    Column("depth", BigInteger, nullable=False),
    Column("beyond_finality", Integer, nullable=False),  # 0/1: deeper than the finality depth
)

# --- events ------------------------------------------------------------------------------------------

# The transactional outbox: an event row commits with the change that causes it; delivery reads it.
outbox_events = Table(
    "outbox_events",
    metadata,
    Column("id", Text, primary_key=True),  # evt_<uuid hex>
    Column("organisation_id", Text),
    Column("type", Text, nullable=False),
    Column("api_version", Text, nullable=False, server_default=text("'v1'")),
    Column("data", JSONB, nullable=False),  # {"object": {...}}
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),  # delivery order
    Index(None, "type", "created_at"),
)
