"""What a command run in a `vip dev` checkout learns from the running stack's data directory: the
configuration overlays `vip dev` wrote there (its local network, `webhooks.allow_http`, the API's
port) and the demo organisation's API key."""

from __future__ import annotations

import tomllib
from pathlib import Path

from vip.config import Settings, load_settings
from vip.devstack.postgres import embedded_postgres_url, to_sqlalchemy_url

DEFAULT_DATA_DIR = Path(".vip-dev")  # in the working directory, like node_modules
OVERLAYS = ("networks.local.toml", "service.local.toml")  # written by `vip dev` (vip.devstack.dev)
DEV_API_KEY = "dev-api-key"


def database_url(settings: Settings) -> str:
    """DATABASE_URL when set, else the embedded PostgreSQL in the default data directory."""
    if settings.database_url:
        return to_sqlalchemy_url(settings.database_url)
    return embedded_postgres_url(DEFAULT_DATA_DIR / "pg")


def with_dev_stack(settings: Settings, data_dir: Path = DEFAULT_DATA_DIR) -> Settings:
    """`settings` with the dev stack's overlays when `vip dev` has written them in `data_dir` and the
    command uses that stack's database (DATABASE_URL unset, or the one the overlay names); else
    unchanged.

    The overlays are what makes the dev stack local: without them a command in the checkout wrote to
    the dev database under production rules (an http://127.0.0.1 webhook URL was refused). A command
    given another database never takes them."""
    overlays = [data_dir / name for name in OVERLAYS if (data_dir / name).exists()]
    if not overlays:
        return settings
    if settings.database_url and to_sqlalchemy_url(settings.database_url) != _stack_database(data_dir):
        return settings
    return load_settings(extra_files=overlays)


def _stack_database(data_dir: Path) -> str | None:
    """The database the dev stack in `data_dir` uses, as its overlay names it."""
    try:
        named = tomllib.loads((data_dir / "service.local.toml").read_text()).get("database_url")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return to_sqlalchemy_url(named) if isinstance(named, str) else None


def dev_api_key(data_dir: Path = DEFAULT_DATA_DIR) -> str | None:
    """The demo organisation's key a running `vip dev` saved (all scopes), if any."""
    saved = data_dir / DEV_API_KEY
    return saved.read_text().strip() or None if saved.exists() else None
