"""Settings: the shipped config/, overlay files, the environment, and strict validation."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
from eth_utils import to_checksum_address
from pydantic import ValidationError

from vip.config import DEFAULT_CONFIG_DIR, ConfigError, load_settings

MAINNETS = {"ethereum", "polygon", "arbitrum", "base"}
LOCAL_TOKEN = "0x5fbdb2315678afecb367f032d93f642f64180aa3"  # lower-case on purpose

LOCAL_OVERLAY = f"""
database_url = "postgresql://from-file/db"

[networks.local]
chain_id = 31337
rpc_url = "http://127.0.0.1:8545"
local = true
finality_depth = 5
mode = "all"

[networks.local.tokens.USDC]
address = "{LOCAL_TOKEN}"

[networks.ethereum]
finality_depth = 12

[api]
port = 9999
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_config_networks_disabled_without_rpc_env():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    assert set(settings.networks) == MAINNETS
    assert settings.enabled_networks() == []
    for name, network in settings.networks.items():
        assert network.name == name
        assert not network.enabled
        assert network.rpc_url is None
    assert settings.database_url is None


def test_rpc_env_enables_one_network():
    url = "https://base-mainnet.example/v2/key"
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={"VIP_RPC_BASE": url})
    assert [n.name for n in settings.enabled_networks()] == ["base"]
    assert settings.network("base").rpc_url == url
    assert settings.network("base").chain_id == 8453
    assert not settings.network("ethereum").enabled


def test_every_shipped_network_has_its_rpc_env():
    environ = {f"VIP_RPC_{name.upper()}": f"https://{name}.example" for name in MAINNETS}
    settings = load_settings(DEFAULT_CONFIG_DIR, environ=environ)
    assert {n.name for n in settings.enabled_networks()} == MAINNETS
    for name in MAINNETS:
        assert settings.network(name).rpc_url == f"https://{name}.example"


def test_empty_rpc_env_leaves_network_disabled():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={"VIP_RPC_ETHEREUM": ""})
    assert not settings.network("ethereum").enabled


def test_shipped_finality_depths():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    depths = {name: n.finality_depth for name, n in settings.networks.items()}
    assert depths == {"ethereum": 65, "polygon": 200, "arbitrum": 240, "base": 30}


def test_shipped_token_addresses_are_checksummed():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    assert settings.network("ethereum").tokens["USDC"].address == "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
    for network in settings.networks.values():
        assert network.tokens
        for token in network.tokens.values():
            assert token.address == to_checksum_address(token.address)
            assert token.decimals == 6


def test_shipped_counterparty_lists_cover_every_network_with_checksummed_addresses():
    """Every DEX and lending address in the shipped file is written in its valid EIP-55 form (a typo in
    one copied from a source fails its checksum), every shipped network has some, and the settings hold
    them lower-case."""
    raw = tomllib.loads((Path(DEFAULT_CONFIG_DIR) / "verification.toml").read_text())["verification"]
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    networks = set(settings.networks)
    assert networks == {"ethereum", "polygon", "arbitrum", "base"}
    for kind in ("dex_addresses", "lending_addresses"):
        assert set(raw[kind]) == networks, kind
        for network, addresses in raw[kind].items():
            assert addresses and len(set(addresses)) == len(addresses), (kind, network)
            for address in addresses:
                assert address == to_checksum_address(address), (kind, network, address)
            loaded = getattr(settings.verification, kind)[network]
            assert loaded == tuple(a.lower() for a in addresses)


def test_overlay_via_extra_files(tmp_path):
    overlay = write(tmp_path, "local.toml", LOCAL_OVERLAY)
    settings = load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={})
    local = settings.network("local")
    assert local.name == "local"
    assert local.local and local.enabled
    assert local.rpc_url == "http://127.0.0.1:8545"
    assert local.mode == "all"
    # Lower-case in the file, checksummed in the settings.
    assert local.tokens["USDC"].address == to_checksum_address(LOCAL_TOKEN)
    assert local.tokens["USDC"].address != LOCAL_TOKEN
    assert [n.name for n in settings.enabled_networks()] == ["local"]
    # Overridden keys change, the keys next to them stay.
    assert settings.network("ethereum").finality_depth == 12
    assert settings.network("ethereum").chain_id == 1
    assert settings.network("ethereum").tokens["USDT"].address == "0xdAC17F958D2ee523a2206206994597C13D831ec7"
    assert settings.api.port == 9999
    assert settings.api.host == "127.0.0.1"
    assert settings.database_url == "postgresql://from-file/db"


def test_overlay_via_vip_config_env(tmp_path):
    first = write(tmp_path, "local.toml", LOCAL_OVERLAY)
    second = write(tmp_path, "later.toml", "[api]\nport = 7000\n")
    environ = {"VIP_CONFIG": os.pathsep.join([str(first), str(second)])}
    settings = load_settings(DEFAULT_CONFIG_DIR, environ=environ)
    assert settings.network("local").local
    assert settings.network("ethereum").finality_depth == 12
    assert settings.api.port == 7000, "later overlay files win"


def test_database_url_env_overrides_files(tmp_path):
    overlay = write(tmp_path, "local.toml", LOCAL_OVERLAY)
    url = "postgresql://user:pw@db.internal:5432/vip"
    settings = load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={"DATABASE_URL": url})
    assert settings.database_url == url


def test_database_url_env_without_overlay():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={"DATABASE_URL": "postgresql://h/db"})
    assert settings.database_url == "postgresql://h/db"


@pytest.mark.parametrize(
    "text",
    [
        "unknown_setting = 1\n",
        "[api]\nprot = 8080\n",
        "[networks.ethereum]\nfinality_dept = 10\n",
        '[networks.ethereum.tokens.USDC]\nsymbol = "USDC"\n',
    ],
    ids=["top-level", "section", "network", "token"],
)
def test_unknown_keys_refused(tmp_path, text):
    overlay = write(tmp_path, "bad.toml", text)
    with pytest.raises(ConfigError) as refused:
        load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={})
    # One line naming the offending key and the files it may come from.
    assert "\n" not in str(refused.value) and str(overlay) in str(refused.value)
    assert "Extra inputs are not permitted" in str(refused.value)


def test_invalid_values_refused_naming_the_key(tmp_path):
    overlay = write(tmp_path, "bad.toml", "[networks.ethereum]\nfinality_depth = -1\n")
    with pytest.raises(ConfigError, match=r"configuration key networks\.ethereum\.finality_depth: "):
        load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={})
    overlay = write(tmp_path, "bad2.toml", '[networks.ethereum]\nmode = "everything"\n')
    with pytest.raises(ConfigError, match=r"networks\.ethereum\.mode"):
        load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={})


def test_toml_syntax_error_names_the_file(tmp_path):
    overlay = write(tmp_path, "broken.toml", "[api\nport = 1\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(overlay))}: not valid TOML: "):
        load_settings(DEFAULT_CONFIG_DIR, extra_files=[overlay], environ={})


def test_missing_overlay_names_the_file(tmp_path):
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_settings(DEFAULT_CONFIG_DIR, environ={"VIP_CONFIG": str(missing)})


def test_settings_are_frozen():
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    with pytest.raises(ValidationError):
        settings.network("base").finality_depth = 1  # type: ignore[misc]


def test_environ_is_not_read_from_process(monkeypatch):
    monkeypatch.setenv("VIP_RPC_ETHEREUM", "https://from-process.example")
    settings = load_settings(DEFAULT_CONFIG_DIR, environ={})
    assert not settings.network("ethereum").enabled
