"""Resource identifiers: a type prefix and 24 random hex characters (e.g. usr_3f1c...)."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"
