"""Typed settings, loaded once at start from `config/*.toml`, overlay files and the environment.

Nothing else in the code base reads environment variables: the CLI calls `load_settings()` and passes
the result (or the parts of it a component needs) down.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from eth_utils import to_checksum_address
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_DIR = REPO_ROOT / "config"
# Files under config/ with typed loaders of their own (vip.platforms), not part of Settings.
SEPARATE_CONFIG_FILES = frozenset({"platforms.toml"})

# Environment variables the service reads (all of them, in one place).
ENV_DATABASE_URL = "DATABASE_URL"
ENV_CONFIG_FILES = "VIP_CONFIG"  # extra TOML files (os.pathsep-separated) overlaid on config/
ENV_LOG_FORMAT = "VIP_LOG_FORMAT"  # "console" or "json"
ENV_STATE_SECRET = "VIP_STATE_SECRET"  # signs OAuth state values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenConfig(_Strict):
    address: str
    decimals: int = 6

    @field_validator("address")
    @classmethod
    def _checksum(cls, value: str) -> str:
        return to_checksum_address(value)


class NetworkConfig(_Strict):
    name: str = ""
    chain_id: int
    # Either the URL itself (local networks written by `vip dev`) or the variable that holds it.
    rpc_url: str | None = None
    rpc_url_env: str | None = None
    local: bool = False
    tokens: dict[str, TokenConfig]
    disbursement_contract: str | None = None
    finality_depth: int = Field(ge=0)
    poll_interval_s: float = Field(default=2.0, gt=0)
    max_block_range: int = Field(default=2000, ge=1)
    initial_block_range: int = Field(default=100, ge=1)
    mode: Literal["watched", "all"] = "watched"
    start_block: int = Field(default=0, ge=0)

    @field_validator("disbursement_contract")
    @classmethod
    def _checksum_contract(cls, value: str | None) -> str | None:
        return to_checksum_address(value) if value else None

    @property
    def enabled(self) -> bool:
        return bool(self.rpc_url)

    def token_by_address(self) -> dict[str, str]:
        """Lower-case token contract address -> symbol."""
        return {t.address.lower(): symbol for symbol, t in self.tokens.items()}


class RateLimitConfig(_Strict):
    """Requests per minute (the spec's table)."""

    vip_report_per_user: int = Field(default=10, ge=1)
    risk_score_per_user: int = Field(default=20, ge=1)
    transactions_per_key: int = Field(default=60, ge=1)
    default_per_key: int = Field(default=120, ge=1)


class ApiConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = 8080
    public_base_url: str = "http://127.0.0.1:8080"
    rate_limits: RateLimitConfig = RateLimitConfig()
    # Signs OAuth `state` values. Set it in production (VIP_STATE_SECRET); dev and tests use a fixed one.
    state_secret: str = "dev-only-state-secret"


class DaemonConfig(_Strict):
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464


class RpcConfig(_Strict):
    timeout_s: float = Field(default=20.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_s: float = Field(default=0.2, ge=0)
    backoff_cap_s: float = Field(default=10.0, ge=0)
    max_requests_per_s: float = Field(default=50.0, gt=0)
    min_requests_per_s: float = Field(default=1.0, gt=0)
    max_addresses_per_filter: int = Field(default=500, ge=1)


class IndexerConfig(_Strict):
    lag_grace_s: float = Field(default=10.0, ge=0)
    max_logs_per_batch: int = Field(default=20000, ge=1)


# --- webhooks (issue 6) ---
class WebhookConfig(_Strict):
    """Delivery of events to lenders' endpoints. The retry schedule is the spec's (vip.webhooks.schedule)."""

    # Plain http:// endpoint URLs are accepted only when true (local development); https otherwise.
    allow_http: bool = False
    # One attempt's time-out, connect to last byte of the answer; longer counts as a failed attempt.
    timeout_s: float = Field(default=10.0, gt=0)
    # After a rotation the previous secret keeps signing (a second signature header) this long.
    rotation_overlap_s: float = Field(default=86400.0, ge=0)
    # How often an idle worker looks for new events and due deliveries.
    poll_interval_s: float = Field(default=0.2, gt=0)
    # Deliveries a worker holds (running or queued), and concurrent attempts per endpoint (so one slow
    # endpoint cannot take every slot).
    max_in_flight: int = Field(default=64, ge=1)
    max_in_flight_per_endpoint: int = Field(default=4, ge=1)
    # Events fanned out into deliveries per transaction.
    fanout_batch: int = Field(default=500, ge=1)
    # A leased delivery is due again this long after 4 time-outs (the most a worker queues it) if its
    # worker died.
    lease_margin_s: float = Field(default=60.0, gt=0)


class Settings(_Strict):
    database_url: str | None = None
    log_format: Literal["console", "json"] = "console"
    api: ApiConfig = ApiConfig()
    daemon: DaemonConfig = DaemonConfig()
    rpc: RpcConfig = RpcConfig()
    indexer: IndexerConfig = IndexerConfig()
    networks: dict[str, NetworkConfig] = {}
    webhooks: WebhookConfig = WebhookConfig()

    @model_validator(mode="after")
    def _name_networks(self) -> Settings:
        for name, network in self.networks.items():
            if network.name != name:
                object.__setattr__(network, "name", name)
        return self

    def enabled_networks(self) -> list[NetworkConfig]:
        return [n for n in self.networks.values() if n.enabled]

    def network(self, name: str) -> NetworkConfig:
        return self.networks[name]


def deep_merge(base: dict, overlay: Mapping) -> dict:
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toml(path: Path) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def load_settings(
    config_dir: Path = DEFAULT_CONFIG_DIR,
    extra_files: list[Path] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read `config_dir/*.toml`, then overlay files (from `extra_files` and `$VIP_CONFIG`), then env."""
    env = os.environ if environ is None else environ
    raw: dict = {}
    for path in sorted(config_dir.glob("*.toml")):
        if path.name not in SEPARATE_CONFIG_FILES:
            raw = deep_merge(raw, _read_toml(path))
    overlays = list(extra_files or [])
    overlays += [Path(p) for p in env.get(ENV_CONFIG_FILES, "").split(os.pathsep) if p]
    for path in overlays:
        raw = deep_merge(raw, _read_toml(path))

    for network in raw.get("networks", {}).values():
        var = network.get("rpc_url_env")
        if var and not network.get("rpc_url") and env.get(var):
            network["rpc_url"] = env[var]
    if env.get(ENV_DATABASE_URL):
        raw["database_url"] = env[ENV_DATABASE_URL]
    if env.get(ENV_LOG_FORMAT):
        raw["log_format"] = env[ENV_LOG_FORMAT]
    if env.get(ENV_STATE_SECRET):
        raw.setdefault("api", {})["state_secret"] = env[ENV_STATE_SECRET]
    return Settings.model_validate(raw)
