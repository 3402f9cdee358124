"""Every table of the service, as SQLAlchemy Core `Table`s. Alembic migrations create them.

Conventions: addresses and hashes are lower-case 0x hex text; token amounts are raw base-unit integers in
NUMERIC(78,0) (uint256 fits); logs are keyed on their natural key (network, tx_hash, log_index), never on a
surrogate, so a log written twice (backfill and live follower, or a replay after a crash) is one row.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

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
    # Highest block treated as final (never above block_number); NULL until the follower's first range
    # (readers then fall back to block_number - finality_depth). indexer/store.py final_block().
    Column("final_block", BigInteger),
    # The follower leading the network (indexer/leadership.py): each take of the lead raises the fencing
    # token; a commit whose follower holds another token is refused (migration 0023).
    Column("leader_token", BigInteger, nullable=False, server_default=text("0")),
    Column("leader", Text),  # "host:pid" of the daemon that took the lead last
    Column("leader_since", DateTime(timezone=True)),
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
    # An address's transfers in (block, log) order: a keyset page of /v1/transactions is an index range
    # read in order, never a sort of the address's whole history (migration 0008).
    Index(None, "network", "from_address", "block_number", "log_index"),
    Index(None, "network", "to_address", "block_number", "log_index"),
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
    # The follower's every-step read of addresses it has not covered yet (migration 0017).
    Index("ix_watched_addresses_not_live", "network", postgresql_where=text("live_from_block IS NULL")),
    # The backfiller's every-poll read of the histories still to fetch (migration 0017).
    Index("ix_watched_addresses_backfill_pending", "network",
          postgresql_where=text("backfill_done_at IS NULL")),
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
    # Set in the transaction that creates the event's deliveries (one per matching endpoint), so every
    # committed event is fanned out exactly once, by whichever delivery worker takes it first.
    Column("fanned_out_at", DateTime(timezone=True)),
    Index(None, "type", "created_at"),
)

# --- organisations, keys, users --------------------------------------------------------------------------

organisations = Table(
    "organisations",
    metadata,
    Column("id", Text, primary_key=True),  # org_<hex>
    Column("name", Text, nullable=False, unique=True),
    # The lender's funding wallet used when a payment intent names none.
    Column("default_funding_wallet", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Text, primary_key=True),  # key_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("prefix", Text, nullable=False),  # first characters of the secret, shown in listings
    Column("secret_hash", Text, nullable=False, unique=True),  # sha256 hex of the secret; never the secret
    Column("scopes", ARRAY(Text), nullable=False),
    Column("description", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("last_used_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
    Index(None, "organisation_id"),
)

# The dashboard's sort keys on the user's latest VIP: index name -> (column, what a missing VIP sorts as,
# below any value). Indexed as coalesce(column, missing); the list orders by the same expressions
# (vip.dashboard.borrower_list), which PostgreSQL must see spelled alike to read the index.
LATEST_VIP_SORTS = {
    "ix_users_latest_vip_generated_at": ("latest_vip_generated_at", "'0001-01-01 00:00:00+00'::timestamptz"),
    "ix_users_latest_vip_income": ("latest_vip_income", "'-1'::numeric"),
    "ix_users_latest_vip_fraud_flags": ("latest_vip_fraud_flags", "0"),
}

users = Table(
    "users",
    metadata,
    Column("id", Text, primary_key=True),  # usr_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("external_id", Text),
    Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Development stacks only: the user's verification runs at this clock's frozen time (test_clocks).
    Column("test_clock_id", Text, ForeignKey("test_clocks.id")),
    Index(None, "organisation_id", "external_id", unique=True,
          postgresql_where=text("external_id IS NOT NULL")),
    # The user's latest VIP (a finished one before a pending one), kept by a trigger on vip_reports
    # (migration 0028): the dashboard's list sorts and filters by it without reading every user's reports.
    Column("latest_vip_id", Text),
    Column("latest_vip_status", Text),
    Column("latest_vip_generated_at", DateTime(timezone=True)),
    Column("latest_vip_income", Numeric(38, 6)),
    Column("latest_vip_fraud_flags", Integer),
    # The dashboard's borrowers list, newest first: a page is an index range (migration 0027).
    Index(None, "organisation_id", "created_at", "id"),
    # ... and by latest VIP, income, fraud flags (migration 0028; the list spells the same expressions).
    *(Index(name, "organisation_id", text(f"coalesce({column}, {missing})"), "id")
      for name, (column, missing) in LATEST_VIP_SORTS.items()),
)

test_clocks = Table(
    "test_clocks",
    metadata,
    Column("id", Text, primary_key=True),  # clk_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("name", Text),
    Column("frozen_time", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# --- connections and what they bring ---------------------------------------------------------------------

connections = Table(
    "connections",
    metadata,
    Column("id", Text, primary_key=True),  # con_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("type", Text, nullable=False),  # wallet | platform
    Column("provider", Text, nullable=False),  # wallet provider name, or platform identifier
    Column("identifier", Text, nullable=False),  # wallet address (lower-case), or account holder reference
    Column("network", Text),  # wallet connections
    Column("source_type", Text),  # platform connections: payroll, neobank_account, ...
    Column("account_id", Text),  # platform connections: the platform's account id
    Column("status", Text, nullable=False),  # active | revoked | expired
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_synced_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
    Index(None, "user_id", "created_at"),
    # One active wallet connection per user, network and address; one active platform account per user.
    Index("uq_connections_active_wallet", "user_id", "network", "identifier", unique=True,
          postgresql_where=text("type = 'wallet' AND status = 'active'")),
    Index("uq_connections_active_account", "user_id", "provider", "account_id", unique=True,
          postgresql_where=text("type = 'platform' AND status = 'active'")),
)

wallets = Table(
    "wallets",
    metadata,
    Column("id", Text, primary_key=True),  # wal_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("connection_id", Text, ForeignKey("connections.id"), nullable=False, unique=True),
    Column("address", Text, nullable=False),  # lower-case
    Column("network", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index(None, "user_id", "network"),
    Index(None, "network", "address"),
)

# The sites an organisation's borrowers sign in on: a Sign-In with Ethereum message is accepted only for one
# of them (its EIP-4361 `domain`), with a URI under one of the domain's prefixes.
sign_in_domains = Table(
    "sign_in_domains",
    metadata,
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("domain", Text, nullable=False),  # lower-case authority: host, or host:port
    Column("uri_prefixes", ARRAY(Text), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("organisation_id", "domain"),
)

# Sign-In with Ethereum nonces: single use, bound to a user, short-lived.
wallet_nonces = Table(
    "wallet_nonces",
    metadata,
    Column("nonce", Text, primary_key=True),
    Column("organisation_id", Text, nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("issued_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
)

# OAuth `state` values handed to platforms: single use, bound to a user and a platform, short-lived.
oauth_states = Table(
    "oauth_states",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organisation_id", Text, nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("platform", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
)

# Off-chain income records of a platform connection (pulled by OAuth or pushed directly).
income_records = Table(
    "income_records",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("connection_id", Text, ForeignKey("connections.id"), nullable=False),
    Column("record_date", Date, nullable=False),
    Column("amount", Numeric(38, 6), nullable=False),
    Column("currency", Text, nullable=False),
    Column("direction", Text, nullable=False),  # inbound | outbound
    Column("from_reference", Text),  # origin address (lower-case) or platform reference
    Column("description", Text),
    Index(None, "connection_id", "record_date"),
)

# Classification and fraud flags of a transfer as seen from one wallet (written by verification).
transfer_labels = Table(
    "transfer_labels",
    metadata,
    Column("network", Text, nullable=False),
    Column("tx_hash", Text, nullable=False),
    Column("log_index", Integer, nullable=False),
    Column("wallet_address", Text, nullable=False),
    Column("classification", Text, nullable=False),
    Column("fraud_flags", ARRAY(Text), nullable=False, server_default=text("'{}'")),
    Column("payroll_match", JSONB),
    Column("labelled_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    PrimaryKeyConstraint("network", "tx_hash", "log_index", "wallet_address"),
)

# --- request handling -------------------------------------------------------------------------------------

# First response to each Idempotency-Key (per API key), replayed for the same request within 24 h.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("api_key_id", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("request_hash", Text, nullable=False),
    Column("status_code", Integer),  # null while the first request is still running
    Column("response_body", Text),  # byte-for-byte what was sent
    # What the request created, written in the transaction that created it (a charge, an intent): a retry
    # after a lost answer is answered with it (vip.store.idempotency).
    Column("resource_id", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    PrimaryKeyConstraint("api_key_id", "key"),
)

# Fixed one-minute windows shared by every API process.
rate_limit_windows = Table(
    "rate_limit_windows",
    metadata,
    Column("bucket", Text, nullable=False),
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("count", Integer, nullable=False),
    PrimaryKeyConstraint("bucket", "window_start"),
)

# --- balances ---------------------------------------------------------------------------------------------

# Token balances of watched addresses as of an indexed block (`balanceOf` read at that block, the indexer's
# cursor when it was read), kept current by `indexer.balances.BalanceRefresher`. `block_hash` is the hash
# of that block, so a reorg that replaced it (even at the same height) is noticed.
address_balances = Table(
    "address_balances",
    metadata,
    Column("network", Text, nullable=False),
    Column("address", Text, nullable=False),  # lower-case
    Column("token", Text, nullable=False),  # symbol from config, e.g. USDC
    Column("balance", UINT256, nullable=False),  # raw base units
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    PrimaryKeyConstraint("network", "address", "token"),
)

# GET /v1/transactions?classification=...: a wallet's labels of one class, without reading all its transfers.
Index("ix_transfer_labels_network_wallet_address_classification",
      transfer_labels.c.network, transfer_labels.c.wallet_address, transfer_labels.c.classification)

# --- disbursement -----------------------------------------------------------------------------------------

# A lender's staged loan payout: approve the organisation's spender for `amount`, then charge it once.
payment_intents = Table(
    "payment_intents",
    metadata,
    Column("id", Text, primary_key=True),  # pi_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    # pending_approval | approval_confirmed | expired | succeeded | failed
    Column("status", Text, nullable=False),
    Column("amount_usd", Numeric(38, 6), nullable=False),
    Column("amount", UINT256, nullable=False),  # token base units
    Column("token", Text, nullable=False),
    Column("token_address", Text, nullable=False),  # lower-case
    Column("network", Text, nullable=False),
    Column("recipient_wallet", Text, nullable=False),  # lower-case
    Column("funding_wallet", Text, nullable=False),  # lower-case; the approving owner
    Column("contract_address", Text, nullable=False),  # lower-case; the organisation's spender
    Column("chain_intent_id", Text, nullable=False, unique=True),  # bytes32 hex handed to disburse()
    Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("approval_tx_hash", Text),
    Column("approval_confirmed_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    # USDT with a non-zero allowance at creation: the approval instructions start with approve(0).
    Column("approval_reset_required", Boolean, nullable=False, server_default=text("false")),
    # Creation order (timestamps tie on a chain clock): approvals confirm intents first come, first served.
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    # The total allowance the approval instructions ask for: every open intent of the same funding wallet,
    # token and spender plus this one (null on rows older than migration 0019: the intent's own amount).
    Column("approval_amount", UINT256),
    # approval | standing_allowance: how a confirmed intent is covered (vip.payments.ledger), told by
    # whether the covering Approval was mined above the node's latest block at creation (`created_block`).
    Column("approval_coverage", Text),
    Column("created_block", BigInteger),
    Index(None, "status", "network", "created_at"),
    Index(None, "organisation_id", "created_at"),
)

# A lender's treasury, registered to one organisation with a signature by the wallet (EIP-191 for a key,
# ERC-1271 for a contract wallet) over a message naming the organisation and a nonce. The address is the
# primary key: it belongs to at most one organisation, and intents may only name their own organisation's.
funding_wallets = Table(
    "funding_wallets",
    metadata,
    Column("address", Text, primary_key=True),  # lower-case
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("network", Text, nullable=False),  # where the proof was checked (a contract wallet's chain)
    Column("kind", Text, nullable=False),  # eoa | contract
    Column("registered_at", DateTime(timezone=True), nullable=False),
    Index(None, "organisation_id", "registered_at"),
)

# Single-use challenges of funding wallet registration: the exact message the wallet must sign.
funding_wallet_nonces = Table(
    "funding_wallet_nonces",
    metadata,
    Column("nonce", Text, primary_key=True),
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("address", Text, nullable=False),  # lower-case
    Column("network", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("issued_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
)

# At most one charge per intent (the unique payment_intent_id), whatever the clients do.
charges = Table(
    "charges",
    metadata,
    Column("id", Text, primary_key=True),  # ch_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("payment_intent_id", Text, ForeignKey("payment_intents.id"), nullable=False, unique=True),
    Column("status", Text, nullable=False),  # pending | succeeded | failed
    Column("network", Text, nullable=False),
    Column("approval_tx_hash", Text, nullable=False),
    Column("disbursement_tx_hash", Text),
    Column("failure_code", Text),
    Column("failure_message", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("requested_at", DateTime(timezone=True), nullable=False, server_default=NOW),  # wall clock
    Column("executed_at", DateTime(timezone=True)),
    # Lease of the one daemon executing the charge; wall clock of the database.
    Column("locked_until", DateTime(timezone=True)),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Index("ix_charges_pending", "next_attempt_at", postgresql_where=text("status = 'pending'")),
)

# The daemons that execute charges (they hold the operator key), one row per daemon and network, beaten
# every few seconds; the API answers 503 for a network none has beaten recently (database clock).
charge_executors = Table(
    "charge_executors",
    metadata,
    Column("instance_id", Text, primary_key=True),  # one per daemon process
    Column("network", Text, primary_key=True),
    Column("operator_address", Text, nullable=False),  # public; lower-case
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("seen_at", DateTime(timezone=True), nullable=False),
    Index(None, "network", "seen_at"),
)

# Every signed disburse() transaction, recorded before it is broadcast; replacements share the nonce.
disbursement_transactions = Table(
    "disbursement_transactions",
    metadata,
    Column("tx_hash", Text, primary_key=True),
    Column("charge_id", Text, ForeignKey("charges.id"), nullable=False),
    Column("network", Text, nullable=False),
    Column("sender", Text, nullable=False),  # the operator address, lower-case
    Column("nonce", BigInteger, nullable=False),
    Column("raw_tx", Text, nullable=False),  # signed bytes, hex: re-broadcastable after a crash
    Column("gas_limit", BigInteger, nullable=False),
    Column("max_fee_per_gas", UINT256, nullable=False),
    Column("max_priority_fee_per_gas", UINT256, nullable=False),
    # signed | broadcast | mined | reverted | replaced; `external`: a transaction we did not sign (another
    # tool holding the operator key) that paid the charge, `external_removed` once a reorg took it away
    Column("status", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("broadcast_at", DateTime(timezone=True)),
    Column("block_number", BigInteger),
    # The node's latest block just before signing: its Disbursed log can only be at or above it.
    Column("sent_from_block", BigInteger),
    Index(None, "charge_id"),
    Index(None, "network", "sender", "nonce"),
    # The mined ones not final yet: what the charge execution job re-checks for reorgs.
    Index("ix_disbursement_transactions_mined", "network", "block_number",
          postgresql_where=text("status IN ('mined', 'external')")),
)

# The next nonce of each operator account, allocated under this row's lock (several processes share it).
operator_nonces = Table(
    "operator_nonces",
    metadata,
    Column("network", Text, nullable=False),
    Column("sender", Text, nullable=False),
    Column("next_nonce", BigInteger, nullable=False),
    PrimaryKeyConstraint("network", "sender"),
)

# --- verification (VIP reports and risk scores) ------------------------------------------------------------

# One VIP per generation. A `pending` row is also the daemon's job: workers take due rows with
# FOR UPDATE SKIP LOCKED. `report` holds the spec's VIP report body once the pipeline has finished.
vip_reports = Table(
    "vip_reports",
    metadata,
    Column("id", Text, primary_key=True),  # vip_<hex>
    # Request order: "the latest report" even when two share a requested_at (a frozen local chain clock).
    Column("seq", BigInteger, Identity(), nullable=False, unique=True),
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("lookback_months", Integer, nullable=False),
    Column("status", Text, nullable=False),  # pending | verified | partially_verified | unverified | error
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("generated_at", DateTime(timezone=True)),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),  # when a pending row is due
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    # When the job asked the indexer for the counterparties' transfers (cycle search needs them).
    Column("fetch_requested_at", DateTime(timezone=True)),
    Column("error_code", Text),
    Column("verified_monthly_income", Numeric(38, 6)),
    Column("report", JSONB),
    # Cash-flow facts of the same data (average USDC balance, obligations) for the risk score.
    Column("cashflow", JSONB),
    Index(None, "user_id", "lookback_months", "seq"),
    Index("ix_vip_reports_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
)

# Users whose transfer labels are to be worked out again (decision 162): a row per change that labels depend
# on (records stored, a wallet connected, transfers of a user's wallet become final), worked by the daemon's
# labelling job, which removes every row of the user it saw. Rows are only ever inserted by the changes, so
# an insert never waits for a running job.
labelling_queue = Table(
    "labelling_queue",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("queued_at", DateTime(timezone=True), nullable=False),
    Column("due_at", DateTime(timezone=True), nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    # When the job asked the indexer for the trace's counterparties (as vip_reports.fetch_requested_at).
    Column("fetch_requested_at", DateTime(timezone=True)),
    Index(None, "due_at", "id"),
    Index(None, "user_id"),
)

# How far the labelling job has queued the owners of final transfers, per network: it follows each network's
# final block with this cursor of its own, so the indexer's commit does no labelling work (decision 281).
label_cursors = Table(
    "label_cursors",
    metadata,
    Column("network", Text, primary_key=True),
    Column("block_number", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
)

# One risk score per VIP, computed on first request and answered from here afterwards.
risk_scores = Table(
    "risk_scores",
    metadata,
    Column("id", Text, primary_key=True),  # rsk_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("user_id", Text, ForeignKey("users.id"), nullable=False),
    Column("vip_id", Text, ForeignKey("vip_reports.id"), nullable=False, unique=True),
    Column("generated_at", DateTime(timezone=True), nullable=False),
    Column("score", JSONB, nullable=False),  # the spec's risk score body
)

# --- webhooks --------------------------------------------------------------------------------------------

Index("ix_outbox_events_not_fanned_out", outbox_events.c.seq,
      postgresql_where=outbox_events.c.fanned_out_at.is_(None))
Index("ix_outbox_events_organisation_id_seq", outbox_events.c.organisation_id, outbox_events.c.seq)

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", Text, primary_key=True),  # whe_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("url", Text, nullable=False),
    Column("description", Text),
    Column("event_types", ARRAY(Text)),  # null: every event type
    # HMAC keys must be readable to sign: sealed (not hashed) under the key ring of api.token_key
    # (`sealed:` + base64, vip.webhooks.store; docs/security.md), opened only to sign; never logged.
    Column("secret", Text, nullable=False),
    # The secret before the last rotation, still signing until previous_secret_expires_at.
    Column("previous_secret", Text),
    Column("previous_secret_expires_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("deleted_at", DateTime(timezone=True)),
    # The first failed attempt since the last delivered one (null: the last attempt succeeded, or none
    # yet); an endpoint failing for `webhooks.disable_after_days` is disabled (migration 0012).
    Column("failing_since", DateTime(timezone=True)),
    # Disabled endpoints receive nothing until re-enabled (their pending deliveries are cancelled).
    Column("disabled_at", DateTime(timezone=True)),
    Column("disabled_reason", Text),
    Index(None, "organisation_id"),
)

# One row per (event, endpoint): the job a delivery worker takes when `pending` and due.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Text, primary_key=True),  # whd_<hex>
    Column("event_id", Text, ForeignKey("outbox_events.id"), nullable=False),
    Column("endpoint_id", Text, ForeignKey("webhook_endpoints.id"), nullable=False),
    Column("status", Text, nullable=False),  # pending | delivered | failed | cancelled
    Column("attempts", Integer, nullable=False, server_default=text("0")),  # in the current round
    # Due time of the next attempt; while an attempt runs, the end of its lease.
    Column("next_attempt_at", DateTime(timezone=True)),
    Column("last_attempt_at", DateTime(timezone=True)),
    Column("delivered_at", DateTime(timezone=True)),
    # When the delivery was queued: at fan-out, again at a replay (the undelivered-age gauge counts from it).
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index(None, "event_id", "endpoint_id", unique=True),
    # The due deliveries of each endpoint, oldest first (the worker takes a few per endpoint at a time).
    Index("ix_webhook_deliveries_due", "endpoint_id", "next_attempt_at",
          postgresql_where=text("status = 'pending'")),
)

# Every attempt of every delivery, for GET /v1/events/{id} and operators.
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("delivery_id", Text, ForeignKey("webhook_deliveries.id"), nullable=False),
    Column("attempted_at", DateTime(timezone=True), nullable=False),
    Column("status_code", Integer),  # null: no HTTP answer (time-out, connection error)
    Column("error", Text),
    Column("duration_ms", Integer, nullable=False),
    # What was sent and what came back, for the dashboard's event page (migration 0022; null on older
    # attempts): the request's headers (signatures included: they are HMACs, no secret), and the start of
    # the receiver's answer as text (vip.webhooks.sender.RESPONSE_TEXT_LIMIT characters at most).
    Column("request_headers", JSONB),
    Column("response_body", Text),
    Index(None, "delivery_id", "id"),
)

# --- platform tokens ---
# What a re-pull of an OAuth platform connection needs (GET /v1/vip-report?refresh=true): its tokens,
# sealed with AES-256-GCM under `api.token_key` (vip/token_cipher.py). One row per active OAuth connection;
# revoking the connection deletes it. Direct-push connections have none.
platform_tokens = Table(
    "platform_tokens",
    metadata,
    Column("connection_id", Text, ForeignKey("connections.id"), primary_key=True),
    Column("access_token", LargeBinary, nullable=False),
    Column("refresh_token", LargeBinary),
    Column("expires_at", DateTime(timezone=True)),  # from the token answer's expires_in, when given
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# --- the dashboard (vip.dashboard) ---
# An organisation's staff: people who sign in to the dashboard with an email and a password (argon2id
# hash, never the password) and one role. An email is unique within an organisation (stored lower-case).
staff_members = Table(
    "staff_members",
    metadata,
    Column("id", Text, primary_key=True),  # stf_<hex>
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("email", Text, nullable=False),
    Column("password_hash", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    # A password someone else chose (a first password an admin handed over, or a reset): the member must
    # replace it before any other page opens (migration 0022).
    Column("must_change_password", Boolean, nullable=False, server_default=text("false")),
    UniqueConstraint("organisation_id", "email"),
    CheckConstraint("role IN ('admin', 'analyst', 'operator')", name="role"),
)

# Signed-in browsers. The cookie holds a random token; only its SHA-256 is stored, with the session's
# CSRF token. A session ends when idle too long, when too old, or at sign-out (the row is deleted).
staff_sessions = Table(
    "staff_sessions",
    metadata,
    Column("token_hash", Text, primary_key=True),
    Column("member_id", Text, ForeignKey("staff_members.id", ondelete="CASCADE"), nullable=False),
    Column("csrf_token", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("last_seen_at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("expires_at", DateTime(timezone=True), nullable=False),  # the absolute limit
    Index(None, "member_id"),
)

# What staff changed through the dashboard, written in the same transaction as the change. Who is kept
# by value (email) as well as by id, so the log survives a member's removal.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("organisation_id", Text, ForeignKey("organisations.id"), nullable=False),
    Column("member_id", Text),
    Column("member_email", Text, nullable=False),
    Column("action", Text, nullable=False),  # e.g. key.created, endpoint.secret_rotated
    Column("target", Text),  # the id acted on
    Column("details", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("at", DateTime(timezone=True), nullable=False, server_default=NOW),
    Column("request_id", Text),
    Index(None, "organisation_id", "id"),
)
