"""The indexer daemon: per-network followers of USDC/USDT Transfer and Approval logs, backfills, reorgs."""
