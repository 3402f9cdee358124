"""Shared fixtures: a real Anvil node and a real PostgreSQL (embedded unless DATABASE_URL is set)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web3 import Web3

from vip.devstack.anvil import AnvilNode, start_anvil


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    """One Anvil node (chain id 31337) for the whole session; tests must not assume an empty chain."""
    node = start_anvil(chain_id=31337)
    yield node
    node.stop()


@pytest.fixture(scope="session")
def w3(anvil: AnvilNode) -> Web3:
    return Web3(Web3.HTTPProvider(anvil.rpc_url, request_kwargs={"timeout": 30}))
