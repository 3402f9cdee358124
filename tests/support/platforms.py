"""The OAuth platforms as `load_settings` reads them, for tests that need only those: the shipped
config/platforms.toml (or another platforms file laid over it), with the secrets from `environ`, and
fields replaced per platform (to point a platform's endpoints at a local server)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vip.config import DEFAULT_CONFIG_DIR, PlatformConfig, deep_merge, load_settings

DEFAULT_PLATFORMS_FILE = DEFAULT_CONFIG_DIR / "platforms.toml"


def load_platforms(path: Path | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None,
                   environ: Mapping[str, str] | None = None) -> dict[str, PlatformConfig]:
    """Platform id -> its configuration. `path`: a platforms file laid over the shipped configuration;
    `overrides`: platform id -> fields replacing the configured ones (validated like the file's);
    `environ` (default: the process environment) supplies the client secrets."""
    settings = load_settings(DEFAULT_CONFIG_DIR, extra_files=[path] if path else None, environ=environ)
    platforms = dict(settings.platforms)
    for pid, fields in (overrides or {}).items():
        if pid not in platforms:
            raise ValueError(f"override for unknown platform {pid!r}")
        current = platforms[pid]
        changed = PlatformConfig.model_validate(deep_merge(current.model_dump(), fields))
        platforms[pid] = changed.model_copy(update={"client_secret": current.client_secret})
    return platforms
