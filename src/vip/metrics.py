"""Every Prometheus metric of the service, in one namespace. Label values are bounded (networks, methods)."""

from __future__ import annotations

import contextlib
import platform
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import Counter, Gauge, Histogram

NAMESPACE = "vip"

# --- build -------------------------------------------------------------------------------------------------
def package_version() -> str:
    """The installed distribution's version ("unknown" when run from a tree that was never installed)."""
    try:
        return version("vip-service")
    except PackageNotFoundError:
        return "unknown"


BUILD_INFO = Gauge("build_info", "Always 1; the labels say which build is running", ["version", "python"],
                   namespace=NAMESPACE)
BUILD_INFO.labels(package_version(), platform.python_version()).set(1)

# --- HTTP API (route is the route's template, never the raw path: label values stay bounded) -------------
HTTP_REQUESTS = Counter("http_requests_total", "API requests answered, by method, route template and status",
                        ["method", "route", "status"], namespace=NAMESPACE)
HTTP_REQUEST_SECONDS = Histogram("http_request_duration_seconds", "Time to answer an API request",
                                 ["method", "route"], namespace=NAMESPACE,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))

# --- indexer -----------------------------------------------------------------------------------------
HEAD_BLOCK = Gauge("indexer_head_block", "Latest block the network's RPC reports", ["network"],
                   namespace=NAMESPACE)
INDEXED_BLOCK = Gauge("indexer_indexed_block", "Last block fully indexed (the cursor)", ["network"],
                      namespace=NAMESPACE)
LAG_BLOCKS = Gauge("indexer_lag_blocks", "Highest head any node showed lately minus the indexed block, set "
                   "at every attempt, stuck or not", ["network"], namespace=NAMESPACE)
LAG_SECONDS = Gauge("indexer_lag_seconds", "Age of the last indexed block's timestamp against the head's",
                    ["network"], namespace=NAMESPACE)
CURSOR_MOVED = Gauge("indexer_cursor_moved_timestamp_seconds",
                     "Wall-clock time the cursor last moved forward (or the follower started)", ["network"],
                     namespace=NAMESPACE)
DOUBTED_BLOCKS = Counter("indexer_doubted_blocks_total",
                         "Blocks whose logs answer was not proven complete and was asked again, by reason: "
                         "node_behind (the node answering the logs lacked the block), logs_missing (the "
                         "block's logsBloom names our tokens' events, the answer had none)",
                         ["network", "reason"], namespace=NAMESPACE)
LAST_PROGRESS = Gauge("indexer_last_progress_timestamp_seconds",
                      "Wall-clock time of the follower's last successful poll", ["network"],
                      namespace=NAMESPACE)
LOGS_INGESTED = Counter("indexer_logs_ingested_total", "Token logs written", ["network", "kind"],
                        namespace=NAMESPACE)
BATCH_SECONDS = Histogram("indexer_batch_seconds", "Time to fetch and store one block range",
                          ["network", "stage"], namespace=NAMESPACE,
                          buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
BLOCK_RANGE_SIZE = Gauge("indexer_block_range_size", "Current eth_getLogs range size", ["network"],
                         namespace=NAMESPACE)
REORGS = Counter("indexer_reorgs_total", "Reorgs detected and repaired", ["network"], namespace=NAMESPACE)
DEEP_REORGS = Counter("indexer_reorgs_beyond_finality_total",
                      "Reorgs deeper than the network's finality depth (repaired, but alert)",
                      ["network"], namespace=NAMESPACE)
REORG_DEPTH = Histogram("indexer_reorg_depth_blocks", "Depth of repaired reorgs", ["network"],
                        namespace=NAMESPACE, buckets=(1, 2, 3, 5, 10, 20, 50, 100, 250, 500, 1000))
FOLLOWER_ERRORS = Counter("indexer_follower_errors_total", "Follower iterations that failed",
                          ["network", "kind"], namespace=NAMESPACE)
BACKFILL_PENDING = Gauge("indexer_backfill_pending_addresses", "Watched addresses whose backfill is running",
                         ["network"], namespace=NAMESPACE)
BACKFILL_REMAINING = Gauge("indexer_backfill_remaining_blocks", "Blocks left to backfill (largest gap)",
                           ["network"], namespace=NAMESPACE)
BACKFILL_BLOCKS = Counter("indexer_backfill_blocks_total", "Blocks scanned by backfills", ["network"],
                          namespace=NAMESPACE)
INDEXER_LEADER = Gauge("indexer_leader", "1 while this daemon leads the network (its follower runs), 0 while "
                       "it stands by (indexer/leadership.py)", ["network"], namespace=NAMESPACE)
WATCHED_ADDRESSES = Gauge("indexer_watched_addresses", "Addresses in the watch set", ["network"],
                          namespace=NAMESPACE)

# --- RPC -----------------------------------------------------------------------------------------------
RPC_REQUESTS = Counter("rpc_requests_total", "JSON-RPC HTTP requests", ["network", "method"],
                       namespace=NAMESPACE)
RPC_ERRORS = Counter("rpc_errors_total", "JSON-RPC failures by kind", ["network", "method", "kind"],
                     namespace=NAMESPACE)
RPC_BUDGET_UNITS = Counter("rpc_budget_units_total",
                           "Units of the network's RPC budget spent (the provider's unit), by priority "
                           "(follow, jobs, background)", ["network", "priority"], namespace=NAMESPACE)
RPC_BUDGET_WAIT = Histogram("rpc_budget_wait_seconds", "Time a request waited for the budget, by priority",
                            ["network", "priority"], namespace=NAMESPACE,
                            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
RPC_BUDGET_RATE = Gauge("rpc_budget_rate", "Units per second the budget allows now (halved on a 429, back "
                        "up with successes)", ["network"], namespace=NAMESPACE)
RPC_LATENCY = Histogram("rpc_request_seconds", "JSON-RPC request latency", ["network", "method"],
                        namespace=NAMESPACE,
                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))

# --- database hygiene ----------------------------------------------------------------------------------
NETWORK_CALLS_IN_TRANSACTION = Counter(
    "network_calls_in_transaction_total",
    "Network calls made while the calling task held an open database transaction (should stay 0)",
    ["kind"], namespace=NAMESPACE)

# --- jobs (rows in PostgreSQL taken with FOR UPDATE SKIP LOCKED) ----------------------------------------
JOB_OLDEST_PENDING = Gauge("jobs_oldest_pending_seconds",
                           "Age of the oldest job waiting to be worked, by queue (0 when none)", ["queue"],
                           namespace=NAMESPACE)
JOB_ERRORS = Counter("job_errors_total", "Job worker steps that failed, by queue and error class",
                     ["queue", "kind"], namespace=NAMESPACE)

# --- verification -----------------------------------------------------------------------------------------
VIP_REPORTS = Counter("reports_generated_total", "VIP reports finished, by final status", ["status"],
                      namespace=NAMESPACE)
VIP_GENERATION_SECONDS = Histogram("report_generation_seconds", "Time to generate one VIP report",
                                   namespace=NAMESPACE, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))

# --- disbursement -----------------------------------------------------------------------------------------
CHARGES = Counter("charges_total", "Charges finished, by network and outcome (succeeded, failed;"
                  " reopened: a reorg removed the paying transaction)",
                  ["network", "outcome"], namespace=NAMESPACE)
CHARGE_SECONDS = Histogram("charge_execution_seconds", "Charge request to mined receipt", ["network"],
                           namespace=NAMESPACE, buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
PAYMENT_INTENTS = Counter("payment_intents_total", "Payment intent transitions, by network and new status",
                          ["network", "status"], namespace=NAMESPACE)

# --- webhooks -----------------------------------------------------------------------------------------------
WEBHOOK_DELIVERIES = Counter("webhook_deliveries_total",
                             "Delivery attempts by event type and outcome (delivered, retrying, failed)",
                             ["event_type", "outcome"], namespace=NAMESPACE)
WEBHOOK_ATTEMPT_SECONDS = Histogram("webhook_attempt_seconds", "Latency of one delivery attempt",
                                    namespace=NAMESPACE, buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
WEBHOOK_OLDEST_UNDELIVERED = Gauge("webhook_oldest_undelivered_seconds",
                                   "Age of the oldest event with a delivery still due (0 when none)",
                                   namespace=NAMESPACE)


def forget_network_follower(network: str) -> None:
    """Drop the gauges a network's follower, backfiller and range sizer set, when this daemon stops leading
    the network: a standby's stale lag or last poll would otherwise stand beside the new leader's, and
    `max by (network)` alerts would fire on it (counters stay: they only grow)."""
    for gauge in (HEAD_BLOCK, INDEXED_BLOCK, LAG_BLOCKS, LAG_SECONDS, CURSOR_MOVED, LAST_PROGRESS,
                  BLOCK_RANGE_SIZE, BACKFILL_PENDING, BACKFILL_REMAINING, WATCHED_ADDRESSES):
        with contextlib.suppress(KeyError):
            gauge.remove(network)
