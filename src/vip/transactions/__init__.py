"""A user's normalized, fraud-filtered transactions and their wallets with balances."""
