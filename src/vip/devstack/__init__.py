"""Local development stack: embedded PostgreSQL, Anvil, contract deployment, `vip dev`."""
