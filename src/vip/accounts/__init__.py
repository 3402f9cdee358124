"""Organisations, their API keys and their users (borrowers)."""
