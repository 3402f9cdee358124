"""Typed settings, loaded once at start from `config/*.toml`, overlay files and the environment.

Nothing else in the code base reads environment variables: the CLI calls `load_settings()` and passes
the result (or the parts of it a component needs) down.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Literal

from eth_utils import is_address, to_checksum_address
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from vip.resources import default_config_dir
from vip.token_cipher import TokenCipher, parse_keyring
from vip.verification.config import VerificationConfig

DEFAULT_CONFIG_DIR = default_config_dir()

# Environment variables the service reads (all of them, in one place).
ENV_DATABASE_URL = "DATABASE_URL"
ENV_CONFIG_FILES = "VIP_CONFIG"  # extra TOML files (os.pathsep-separated) overlaid on config/
ENV_LOG_FORMAT = "VIP_LOG_FORMAT"  # "console" or "json"
ENV_STATE_SECRET = "VIP_STATE_SECRET"  # signs OAuth state values
# Disbursement operator key: the key itself, or a keystore file (path in config) and its password.
ENV_OPERATOR_KEY = "VIP_OPERATOR_KEY"
ENV_OPERATOR_KEYSTORE_PASSWORD = "VIP_OPERATOR_KEYSTORE_PASSWORD"
# The key that deploys the disbursement contract and owns it (`vip contracts`), when not the operator's:
# the key itself, or a keystore file (`disbursement.deployer_keystore`) and its password.
ENV_DEPLOYER_KEY = "VIP_DEPLOYER_KEY"
ENV_DEPLOYER_KEYSTORE_PASSWORD = "VIP_DEPLOYER_KEYSTORE_PASSWORD"
# The key ring that seals stored secrets (platform tokens, webhook signing secrets): `id:key,...`, the
# first key seals (vip.token_cipher).
ENV_TOKEN_KEY = "VIP_TOKEN_KEY"
ENV_METRICS_TOKEN = "VIP_METRICS_TOKEN"  # when set, the API's /metrics wants `Authorization: Bearer <it>`
# Where `vip listen` and `vip trigger` reach the API, and the key they authenticate with.
ENV_API_URL = "VIP_API_URL"
ENV_API_KEY = "VIP_API_KEY"
ENV_ANVIL_BIN = "VIP_ANVIL_BIN"  # the local chain's binary (`vip dev` and the test plugin only)
# Also read: each network's `rpc_url_env` and each platform's `client_secret_env`, variables the
# configuration files name (`VIP_RPC_ETHEREUM`, `VIP_PLATFORM_PAYSTREAM_SECRET`, ...).


def config_overlay_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The overlay files named in $VIP_CONFIG, in order."""
    env = os.environ if environ is None else environ
    return [Path(p) for p in env.get(ENV_CONFIG_FILES, "").split(os.pathsep) if p]


def anvil_override(environ: Mapping[str, str] | None = None) -> str | None:
    """The Anvil binary named in the environment, if any."""
    return (os.environ if environ is None else environ).get(ENV_ANVIL_BIN) or None


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
    # The operator's EIP-1559 fees on this network (decision 210): a cap on maxFeePerGas in gwei (unset:
    # the disbursement section's `max_fee_gwei`) and a floor on the tip (polygon's validators drop
    # transactions tipping under 30 gwei; elsewhere the node's eth_maxPriorityFeePerGas is enough).
    max_fee_gwei: Decimal | None = Field(default=None, gt=0)
    min_priority_fee_gwei: Decimal = Field(default=Decimal(0), ge=0)
    # Which block counts as final (decision 147): the node's `finalized` or `safe` tag, or `depth`:
    # `finality_depth` blocks behind the head (local chains, and the fallback for a node that does not
    # know the tag). `finality_depth` also bounds how deep a reorg the follower expects.
    finality: Literal["finalized", "safe", "depth"] = "depth"
    finality_depth: int = Field(ge=0)
    # Blocks the follower stays behind the provider's reported head: a load balancer's nodes differ by a
    # few blocks and a lagging one may not have the logs of its newest blocks yet (decision 148).
    head_margin: int = Field(default=0, ge=0)
    poll_interval_s: float = Field(default=2.0, gt=0)
    # eth_getLogs ranges of the live follower (every watched address, or every token log): start at
    # `initial_block_range`, never past `max_block_range`, shrink on the provider's refusal.
    max_block_range: int = Field(default=2000, ge=1)
    initial_block_range: int = Field(default=100, ge=1)
    # The same for a newly watched wallet's history (few addresses: most plans let such a query span
    # any range under their result cap, so it starts large; decision 146).
    history_initial_block_range: int = Field(default=100_000, ge=1)
    history_max_block_range: int = Field(default=10_000_000, ge=1)
    # Where that history comes from (decisions 170-172): `logs` (eth_getLogs over those ranges) or
    # `alchemy_transfers` (the provider's indexed Transfers API, every answer confirmed by eth_getLogs
    # on the blocks it names and by the wallet's balances before anything is stored).
    history_source: Literal["logs", "alchemy_transfers"] = "logs"
    mode: Literal["watched", "all"] = "watched"
    start_block: int = Field(default=0, ge=0)
    # How `watched` mode asks for a range's logs (decisions 175-176): `topic_filters` (two eth_getLogs per
    # `rpc.max_addresses_per_filter` addresses, the address as sender and as recipient), `token_logs`
    # (one eth_getLogs for all the tokens' logs, kept in memory only when they touch a watched address or
    # the disbursement contract), or `auto`: topic filters while the watch set has at most
    # `topic_filter_max_addresses` addresses, token logs past it.
    watched_fetch: Literal["auto", "topic_filters", "token_logs"] = "auto"
    topic_filter_max_addresses: int = Field(default=500, ge=0)
    # What the provider bills (a profile of config/providers.toml: each method's weight in its unit) and
    # this network's budget per second in that unit; every caller of the network draws from it (decision
    # 233). Unset: `rpc.max_requests_per_s` items per second.
    provider: str = "requests"
    rpc_budget_per_s: float | None = Field(default=None, gt=0)
    # Ask the node's `finality` tag at most this often (0: with every head; decision 179). The final
    # block moves in epochs (Ethereum: 6.4 min) or with L1 finality on the L2s: asking it at every poll
    # doubles the head's calls for nothing. What acts on finality waits at most this much longer.
    finality_refresh_s: float = Field(default=0.0, ge=0)

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
    # The dashboard's pages, per client address, in a bucket of their own (a lender's staff behind one
    # office address share it); its stylesheet is never counted (decision 214).
    dashboard_per_client: int = Field(default=600, ge=1)


DEV_TOKEN_KEY = "ZGV2LW9ubHktdG9rZW4ta2V5LWRvLW5vdC11c2UhISE="  # b"dev-only-token-key-do-not-use!!!"
DEV_STATE_SECRET = "dev-only-state-secret"


class ProviderBilling(_Strict):
    """How a provider counts a request (config/providers.toml): each method's weight in `unit`, every
    item of a batch counted; a method not listed weighs `default_weight`."""

    unit: str
    default_weight: float = Field(gt=0)
    weights: dict[str, float] = {}
    source: str = ""


class ApiConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = 8080
    public_base_url: str = "http://127.0.0.1:8080"
    rate_limits: RateLimitConfig = RateLimitConfig()
    # Signs OAuth `state` values. Set it in production (VIP_STATE_SECRET); dev and tests use a fixed one.
    state_secret: str = DEV_STATE_SECRET
    # How long an API process trusts a key it has checked (revocations elsewhere take up to this long).
    key_cache_s: float = Field(default=5.0, ge=0)
    # The key ring sealing stored secrets (platform tokens, webhook signing secrets) with AES-256-GCM:
    # `id:key,id:key` (URL-safe base64 of 32 bytes each; a bare key has id 0), the first seals. Set it in
    # production (VIP_TOKEN_KEY); dev and tests use this fixed, public one.
    token_key: SecretStr = SecretStr(DEV_TOKEN_KEY)
    # The API's /metrics, as the operator chooses: with `metrics_port` set it is served only on a listener
    # of its own (metrics_host:metrics_port, for the scraper's network) and not on the API's port; with a
    # token (VIP_METRICS_TOKEN) it asks for `Authorization: Bearer <token>`; with neither it is open on
    # the API's port (development).
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_token: SecretStr | None = None
    # The proxies (CIDRs: a load balancer, an ingress) whose X-Forwarded-For is believed. A request from
    # one of them is counted against the client that header names (the rightmost address not itself a
    # trusted proxy) by every per-client limit: the API's keyless budget, the dashboard's pages, sign-in
    # and password attempts. From any other peer the header is ignored, so it cannot be spoofed. Empty:
    # the TCP peer is the client (docs/operations.md).
    trusted_proxies: list[IPvAnyNetwork] = Field(default_factory=list)

    @field_validator("token_key")
    @classmethod
    def _token_key_is_32_bytes(cls, value: SecretStr) -> SecretStr:
        parse_keyring(value.get_secret_value())
        return value

    def cipher(self) -> TokenCipher:
        """The key ring of `token_key`."""
        return TokenCipher.from_text(self.token_key.get_secret_value())


class DaemonConfig(_Strict):
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464


class RpcConfig(_Strict):
    timeout_s: float = Field(default=20.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_s: float = Field(default=0.2, ge=0)
    backoff_cap_s: float = Field(default=10.0, ge=0)
    # A network without `rpc_budget_per_s`: its budget in items per second (every item of a batch one).
    max_requests_per_s: float = Field(default=50.0, gt=0)
    # Share of each network's budget (one second of it) the background work (balances, backfills) never
    # spends, and half of which the jobs (approvals, charges) never spend: the follower's (decision 233).
    reserve_for_following: float = Field(default=0.5, ge=0, lt=1)
    max_addresses_per_filter: int = Field(default=500, ge=1)
    # Items per JSON-RPC batch: under every provider's batch cap (Alchemy: 1000 over HTTP, and it
    # recommends under 50; see docs/operations.md "Choosing a provider plan"). A follower's range goes in
    # one batch when it fits (its logs and headers then come from one node), so at least 3.
    max_batch_size: int = Field(default=100, ge=3)
    # The longest `Retry-After` obeyed as is (a longer one is waited for in several retries).
    retry_after_cap_s: float = Field(default=30.0, ge=0)


class IndexerConfig(_Strict):
    lag_grace_s: float = Field(default=10.0, ge=0)
    max_logs_per_batch: int = Field(default=20000, ge=1)
    # The follower keeps its watch set in memory, reads the addresses it has not covered yet at every
    # step, and reloads the whole set this often (and when addresses are removed; decision 177).
    watch_set_reload_s: float = Field(default=300.0, gt=0)
    # A watched address's balances are read again after this long even with no new transfer (a safety
    # net for changes without a Transfer log); one week keeps 100,000 wallets at a third of a call/s per
    # network, where the hour it used to be cost 55 calls/s (decision 212).
    balance_max_age_s: float = Field(default=7 * 86400.0, gt=0)
    # A daemon standing by for a network (another one leads it) tries to take its lead this often: a
    # leader that stops or dies is replaced within about this long (indexer/leadership.py).
    lead_poll_s: float = Field(default=1.0, gt=0)


# --- disbursement ---------------------------------------------------------------------------------------

class DisbursementConfig(_Strict):
    """Payment intents and charges. The operator key comes from $VIP_OPERATOR_KEY or from a keystore
    file (`operator_keystore`) with its password in $VIP_OPERATOR_KEYSTORE_PASSWORD; both are SecretStr
    so they never appear in a repr or a log. Only the daemon (`vip index`) reads them: the API never
    signs (`vip serve` drops them, `without_operator`)."""

    intent_ttl_s: int = Field(default=1800, ge=60)
    max_amount_usd: Decimal = Field(default=Decimal(1_000_000), gt=0)
    # POST /v1/charges waits this long for the daemon to settle the charge, then answers 202 (pending).
    charge_wait_s: float = Field(default=20.0, ge=0)
    # A daemon executing charges beats every third of this; the API answers 503 ERR_DISBURSEMENT_UNAVAILABLE
    # for a network no daemon has beaten for this long (none runs with the operator key).
    executor_stale_s: float = Field(default=15.0, gt=0)
    # A broadcast transaction neither mined nor known to the node after this long is replaced (same nonce).
    replace_after_s: float = Field(default=60.0, gt=0)
    # A transaction the node forgot this soon after broadcast may not have reached the node we asked
    # (load balancers); it is replaced only after this grace.
    drop_grace_s: float = Field(default=2.0, ge=0)
    # Replacement fees: at least this many percent above the previous attempt (nodes demand >= 10).
    fee_bump_percent: int = Field(default=25, ge=10)
    # Cap on maxFeePerGas, in gwei: a fee spike leaves the charge pending rather than overpaying.
    max_fee_gwei: Decimal = Field(default=Decimal(500), gt=0)
    # A daemon's lease on a charge it executes; another daemon takes the charge over after it lapses.
    lease_s: float = Field(default=60.0, gt=0)
    poll_interval_s: float = Field(default=2.0, gt=0)
    operator_private_key: SecretStr | None = None
    operator_keystore: str | None = None
    operator_keystore_password: SecretStr | None = None
    # The operator's public address (written by `vip contracts deploy`): what `vip serve`, which holds no
    # key, checks the contracts' operator against at start; `vip index` checks its key's address too.
    operator_address: str | None = None
    # The deployer and owner of the contract (`vip contracts deploy`, `set-operator` only).
    deployer_private_key: SecretStr | None = None
    deployer_keystore: str | None = None
    deployer_keystore_password: SecretStr | None = None

    @field_validator("operator_address")
    @classmethod
    def _operator_address(cls, value: str | None) -> str | None:
        if value is not None and not is_address(value):
            raise ValueError(f"{value!r} is not an address")
        return to_checksum_address(value) if value else None
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
    # An endpoint whose every attempt failed for this long is disabled (docs/webhooks.md); 0 never.
    disable_after_days: float = Field(default=3.0, ge=0)
    # `GET /v1/events/stream` (vip listen): how often it looks for new events, and the keep-alive.
    stream_poll_s: float = Field(default=0.25, gt=0)
    stream_keepalive_s: float = Field(default=15.0, gt=0)


# --- OAuth platforms --------------------------------------------------------------------------------------
# The off-chain data platforms a user connects by OAuth (config/platforms.toml): per platform its kind,
# OAuth endpoints, client id, the *name* of the variable holding its client secret (never the secret
# itself), the spec's scopes and its known disbursement wallets (the whitelist inbound origins are checked
# against).

PLATFORM_ID = re.compile(r"^[a-z0-9_-]{2,40}$")
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 scope-token characters
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_HTTP_URL = re.compile(r"^https?://[^\s/?#]+(/[^\s#]*)?$")

# Kinds of the seven OAuth platforms (the spec's table: payroll, neobank, exchange).
OAuthSourceType = Literal["payroll", "neobank_account", "exchange_account"]


class PlatformConfig(_Strict):
    """One OAuth platform. `id` is the lowercase identifier clients pass as `platform`."""

    id: str = ""  # filled from the table name (Settings)
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
    # Read by load_settings from the variable `client_secret_env` names; never from a file.
    client_secret: SecretStr = Field(default=SecretStr(""), exclude=True)

    @field_validator("authorize_url", "token_url", "records_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not _HTTP_URL.match(value):
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
        if not value or any(not _SCOPE.match(token) for token in value.split(" ")):
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


class ClientConfig(_Strict):
    """How the developer tools (`vip listen`, `vip trigger`) reach an API: its base URL (default: this
    configuration's `api.public_base_url`) and an API key with the `admin` scope."""

    api_url: str | None = None
    api_key: SecretStr | None = None


class Settings(_Strict):
    database_url: str | None = None
    log_format: Literal["console", "json"] = "console"
    api: ApiConfig = ApiConfig()
    daemon: DaemonConfig = DaemonConfig()
    rpc: RpcConfig = RpcConfig()
    indexer: IndexerConfig = IndexerConfig()
    networks: dict[str, NetworkConfig] = {}
    providers: dict[str, ProviderBilling] = {"requests": ProviderBilling(unit="requests", default_weight=1)}
    disbursement: DisbursementConfig = DisbursementConfig()
    verification: VerificationConfig = Field(default_factory=VerificationConfig)
    webhooks: WebhookConfig = WebhookConfig()
    client: ClientConfig = ClientConfig()
    # Platform id -> its OAuth configuration; none unless loaded (load_settings reads the shipped ones).
    platforms: dict[str, PlatformConfig] = {}

    @field_validator("platforms")
    @classmethod
    def _name_platforms(cls, value: dict[str, PlatformConfig]) -> dict[str, PlatformConfig]:
        for pid in value:
            if not PLATFORM_ID.match(pid):
                raise ValueError(f"platform identifier {pid!r} must match {PLATFORM_ID.pattern}")
        return {pid: p if p.id == pid else p.model_copy(update={"id": pid}) for pid, p in value.items()}

    @model_validator(mode="after")
    def _name_networks(self) -> Settings:
        for name, network in self.networks.items():
            if network.name != name:
                object.__setattr__(network, "name", name)
            if network.provider not in self.providers:
                raise ValueError(f"networks.{name}.provider: {network.provider!r} is not one of the "
                                 f"[providers] ({', '.join(sorted(self.providers))})")
        return self

    def enabled_networks(self) -> list[NetworkConfig]:
        return [n for n in self.networks.values() if n.enabled]

    @property
    def is_development(self) -> bool:
        """A development stack (`vip dev`, tests): some configured network is marked `local`. Anything
        else is production, where the public development secrets are refused (production_secret_problems)."""
        return any(n.local for n in self.networks.values())

    @property
    def disburses(self) -> bool:
        """Some enabled network has a disbursement contract: the operator key is needed."""
        return any(n.disbursement_contract for n in self.enabled_networks())

    def network(self, name: str) -> NetworkConfig:
        return self.networks[name]

    def without_operator(self) -> Settings:
        """These settings with no operator key, keystore or password: what the API runs with, so that
        even a compromised API process holds nothing that signs (the daemon executes every charge)."""
        disbursement = self.disbursement.model_copy(update={
            "operator_private_key": None, "operator_keystore": None, "operator_keystore_password": None,
            "deployer_private_key": None, "deployer_keystore": None, "deployer_keystore_password": None})
        return self.model_copy(update={"disbursement": disbursement})

    @property
    def operator_key_given(self) -> bool:
        """An operator key or keystore password reached these settings (from the environment)."""
        d = self.disbursement
        return d.operator_private_key is not None or d.operator_keystore_password is not None


def deep_merge(base: dict, overlay: Mapping) -> dict:
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class ConfigError(ValueError):
    """A configuration that cannot be used, said in one line naming the file and the key."""


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file (named in ${ENV_CONFIG_FILES} or by the "
                          "caller)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    for pid, table in raw.get("platforms", {}).items():
        if isinstance(table, Mapping) and "client_secret" in table:
            raise ConfigError(f"{path}: platforms.{pid}.client_secret: secrets never go in a file; "
                              "name the environment variable in client_secret_env")
    return raw


def _invalid(exc: ValidationError, files: list[Path]) -> ConfigError:
    """The first problem pydantic found, as `key: what is wrong`, with the files it may come from (the
    layers are merged before validation, so the key, not the file, is what is known for sure)."""
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return ConfigError(f"configuration key {key}: {first['msg']}{more}; set in one of "
                       f"{', '.join(str(f) for f in files)} or the environment (docs/operations.md)")


def load_settings(
    config_dir: Path = DEFAULT_CONFIG_DIR,
    extra_files: list[Path] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read `config_dir/*.toml`, then overlay files (from `extra_files` and `$VIP_CONFIG`), then env.

    The layering is written out here rather than left to pydantic-settings: most variables do not
    follow from a field's path (DATABASE_URL, VIP_STATE_SECRET -> api.state_secret), networks and
    platforms name their own variables in the files (`rpc_url_env`, `client_secret_env`), tests pass
    `environ`, and a BaseSettings would read the process environment again each time anything builds a
    Settings (tests, benches, model_copy), where this reads it once, here.
    """
    env = os.environ if environ is None else environ
    raw: dict = {}
    files = sorted(config_dir.glob("*.toml"))
    files += list(extra_files or [])
    files += config_overlay_files(env)
    for path in files:
        raw = deep_merge(raw, _read_toml(path))

    for network in raw.get("networks", {}).values():
        var = network.get("rpc_url_env")
        if var and not network.get("rpc_url") and env.get(var):
            network["rpc_url"] = env[var]
    for platform in raw.get("platforms", {}).values():
        # An unset variable is an empty secret (dev and tests: no real platform is called).
        var = platform.get("client_secret_env") if isinstance(platform, Mapping) else None
        if isinstance(var, str):
            platform["client_secret"] = env.get(var, "")
    if env.get(ENV_DATABASE_URL):
        raw["database_url"] = env[ENV_DATABASE_URL]
    if env.get(ENV_LOG_FORMAT):
        raw["log_format"] = env[ENV_LOG_FORMAT]
    if env.get(ENV_STATE_SECRET):
        raw.setdefault("api", {})["state_secret"] = env[ENV_STATE_SECRET]
    if env.get(ENV_METRICS_TOKEN):
        raw.setdefault("api", {})["metrics_token"] = env[ENV_METRICS_TOKEN]
    if env.get(ENV_TOKEN_KEY):
        raw.setdefault("api", {})["token_key"] = env[ENV_TOKEN_KEY]
    if env.get(ENV_OPERATOR_KEY):
        raw.setdefault("disbursement", {})["operator_private_key"] = env[ENV_OPERATOR_KEY]
    if env.get(ENV_DEPLOYER_KEY):
        raw.setdefault("disbursement", {})["deployer_private_key"] = env[ENV_DEPLOYER_KEY]
    if env.get(ENV_DEPLOYER_KEYSTORE_PASSWORD):
        raw.setdefault("disbursement", {})["deployer_keystore_password"] = env[ENV_DEPLOYER_KEYSTORE_PASSWORD]
    if env.get(ENV_API_URL):
        raw.setdefault("client", {})["api_url"] = env[ENV_API_URL]
    if env.get(ENV_API_KEY):
        raw.setdefault("client", {})["api_key"] = env[ENV_API_KEY]
    if env.get(ENV_OPERATOR_KEYSTORE_PASSWORD):
        raw.setdefault("disbursement", {})["operator_keystore_password"] = env[ENV_OPERATOR_KEYSTORE_PASSWORD]
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise _invalid(exc, files) from None
