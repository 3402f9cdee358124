"""Alembic migrations (package data: script.py.mako)."""
