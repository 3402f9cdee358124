"""Deploy the local test tokens, the disbursement contract and the benchmark sprayer to a dev chain."""

from __future__ import annotations

from dataclasses import dataclass

from eth_account import Account
from eth_typing import ChecksumAddress
from web3 import Web3
from web3.types import TxReceipt

from vip.chain.contracts import contract_at, deploy_contract, send_transaction


@dataclass(frozen=True)
class LocalContracts:
    usdc: ChecksumAddress
    usdt: ChecksumAddress
    disbursement: ChecksumAddress
    sprayer: ChecksumAddress


def deploy_local_contracts(
    w3: Web3, deployer_key: str, operator_address: str, minter_address: str
) -> LocalContracts:
    """Deploy all four contracts from `deployer_key`, which becomes the Disbursement owner."""
    return LocalContracts(
        usdc=deploy_contract(
            w3, "StandardStablecoin", "USD Coin", "USDC", minter_address, private_key=deployer_key
        ),
        usdt=deploy_contract(
            w3, "TetherStyleStablecoin", "Tether USD", "USDT", minter_address, private_key=deployer_key
        ),
        disbursement=deploy_contract(w3, "Disbursement", operator_address,
                                     Account.from_key(deployer_key).address, private_key=deployer_key),
        sprayer=deploy_contract(w3, "TransferSprayer", private_key=deployer_key),
    )


def mint(w3: Web3, token: str, to: str, amount: int, minter_key: str) -> TxReceipt:
    """Mint `amount` base units (an int, 6 decimals) of either test token to `to`."""
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise ValueError(f"amount must be a positive int of base units, got {amount!r}")
    # Both tokens share the minting ABI, so the standard token's ABI serves for either.
    contract = contract_at(w3, "StandardStablecoin", token)
    return send_transaction(w3, contract.functions.mint(Web3.to_checksum_address(to), amount), minter_key)
