"""The off-chain data platforms a user can connect by OAuth: typed configuration from
`config/platforms.toml`.

Each platform is one `[platforms.<id>]` table: its kind (`source_type`), OAuth endpoints, client id, the
*name* of the environment variable that holds its client secret (the secret itself is never in a file),
the scopes the interface spec assigns to it, and its known disbursement wallets (the whitelist the
verification checks inbound origins against). `load_platforms` reads the file once; tests pass
`overrides` to point the endpoints at a local platform of their own.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from eth_utils import is_address
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from vip.config import DEFAULT_CONFIG_DIR, deep_merge

DEFAULT_PLATFORMS_FILE = DEFAULT_CONFIG_DIR / "platforms.toml"

PLATFORM_ID = re.compile(r"^[a-z0-9_-]{2,40}$")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 scope-token characters
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")

# Kinds of the seven OAuth platforms (the spec's table: payroll, neobank, exchange).
OAuthSourceType = Literal["payroll", "neobank_account", "exchange_account"]


class PlatformConfig(BaseModel):
    """One OAuth platform. `id` is the lowercase identifier clients pass as `platform`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = ""  # filled from the table name by the loader
    name: str = Field(min_length=1, max_length=100)  # display name
    source_type: OAuthSourceType
    authorize_url: str
    token_url: str
    records_url: str
    client_id: str = Field(min_length=1, max_length=200)
    client_secret_env: str
    # Space-separated, sent as the `scope` parameter exactly as written here.
    scopes: str
    whitelisted_addresses: tuple[str, ...] = ()
    # One HTTP call to the platform (token exchange, one page of records) may take at most this long.
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    # A pull that needs more pages or records than this is treated as a failed sync.
    max_pages: int = Field(default=200, ge=1)
    max_records: int = Field(default=20_000, ge=1)
    # The whole pull (token exchange and every page) may take at most this long.
    sync_timeout_s: float = Field(default=60.0, gt=0, le=600)
    # Resolved by the loader from `client_secret_env`; never read from the file.
    client_secret: SecretStr = Field(default=SecretStr(""), exclude=True)

    @field_validator("authorize_url", "token_url", "records_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/?#]+(/[^\s#]*)?$", value):
            raise ValueError("must be an absolute http(s) URL without a fragment")
        return value

    @field_validator("client_secret_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.match(value):
            raise ValueError("must be an environment variable name (upper-case letters, digits, _)")
        return value

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: str) -> str:
        tokens = value.split(" ")
        if not value or any(not _SCOPE.match(token) for token in tokens):
            raise ValueError("must be scope tokens separated by single spaces")
        return value

    @field_validator("whitelisted_addresses")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not is_address(address) or address != address.lower():
                raise ValueError(f"{address!r} is not a lower-case 0x address")
        if len(set(value)) != len(value):
            raise ValueError("addresses are listed more than once")
        return value

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split(" ")


class _PlatformsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    platforms: dict[str, PlatformConfig]


def load_platforms(
    path: Path = DEFAULT_PLATFORMS_FILE,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, PlatformConfig]:
    """Platform id -> its configuration.

    `overrides` maps a platform id to fields replacing the file's (tests point the URLs at a local
    server this way); `environ` (default: the process environment) supplies the client secrets, an
    unset variable meaning an empty secret (dev and tests).
    """
    env = os.environ if environ is None else environ
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    for pid, table in raw.get("platforms", {}).items():
        if isinstance(table, Mapping) and "client_secret" in table:
            raise ValueError(f"{path}: platforms.{pid}.client_secret: secrets never go in the file; "
                             "name the environment variable in client_secret_env")
    for pid, fields in (overrides or {}).items():
        if pid not in raw.get("platforms", {}):
            raise ValueError(f"override for unknown platform {pid!r}")
        raw["platforms"][pid] = deep_merge(raw["platforms"][pid], fields)
    parsed = _PlatformsFile.model_validate(raw)
    registry: dict[str, PlatformConfig] = {}
    for pid, platform in parsed.platforms.items():
        if not PLATFORM_ID.match(pid):
            raise ValueError(f"platform identifier {pid!r} must match {PLATFORM_ID.pattern}")
        registry[pid] = platform.model_copy(update={
            "id": pid, "client_secret": SecretStr(env.get(platform.client_secret_env, ""))})
    return registry
