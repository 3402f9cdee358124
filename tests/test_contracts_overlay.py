"""The overlay `vip contracts` writes: the contract and operator set, everything else the file held kept, and
the result read back by the service's own configuration loader."""

from __future__ import annotations

import tomllib

from vip.cli.contracts import write_overlay
from vip.config import load_settings

CONTRACT = "0x5F0463618aBFBa4d8d53e4DeF7982f13138051E9"
OPERATOR = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def test_the_overlay_keeps_what_it_held_and_the_service_reads_it(tmp_path):
    overlay = tmp_path / "contracts.toml"
    overlay.write_text('[api]\nport = 8081\ntrusted_proxies = ["10.0.0.0/8"]\n\n'
                       '[networks.base]\nrpc_url = "http://127.0.0.1:1/"\nhead_margin = 3\n'
                       '\n[disbursement]\ncharge_wait_s = 12.5\n')
    write_overlay(overlay, "base", CONTRACT, OPERATOR)
    with overlay.open("rb") as fh:
        written = tomllib.load(fh)
    assert written == {"api": {"port": 8081, "trusted_proxies": ["10.0.0.0/8"]},
                       "networks": {"base": {"rpc_url": "http://127.0.0.1:1/", "head_margin": 3,
                                             "disbursement_contract": CONTRACT}},
                       "disbursement": {"charge_wait_s": 12.5, "operator_address": OPERATOR}}
    settings = load_settings(extra_files=[overlay], environ={})
    assert settings.network("base").disbursement_contract == CONTRACT
    assert settings.disbursement.operator_address == OPERATOR
    assert settings.network("base").chain_id == 8453  # the shipped network's other keys stand


def test_a_new_overlay_and_a_second_network(tmp_path):
    overlay = tmp_path / "etc" / "contracts.toml"
    write_overlay(overlay, "base", CONTRACT, OPERATOR)
    write_overlay(overlay, "polygon", OPERATOR, OPERATOR)
    with overlay.open("rb") as fh:
        written = tomllib.load(fh)
    assert written["networks"] == {"base": {"disbursement_contract": CONTRACT},
                                   "polygon": {"disbursement_contract": OPERATOR}}
    assert not list(overlay.parent.glob("*.tmp"))
