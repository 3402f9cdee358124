"""PostgreSQL store: tables (tables.py), engine and migrations (engine.py), the event outbox (outbox.py)."""
