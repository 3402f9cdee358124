"""Compiled contract artifacts and small synchronous web3 helpers to deploy and call them.

The artifacts are built by `node contracts/build.mjs` and committed, so Python never needs a compiler.
The helpers sign locally with a private key (no node-side accounts) and are meant for tooling and tests;
the service's own async transaction path lives elsewhere.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from eth_account import Account
from eth_typing import ChecksumAddress
from eth_utils import abi_to_signature, keccak, to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractConstructor, ContractFunction
from web3.exceptions import ContractLogicError
from web3.types import TxParams, TxReceipt, Wei

from vip.resources import contract_artifacts_dir

ARTIFACTS_DIR = contract_artifacts_dir()

TRANSFER_TOPIC = "0x" + keccak(text="Transfer(address,address,uint256)").hex()
APPROVAL_TOPIC = "0x" + keccak(text="Approval(address,address,uint256)").hex()
DISBURSED_TOPIC = "0x" + keccak(text="Disbursed(bytes32,address,address,address,uint256)").hex()
ERC1271_MAGIC = "0x1626ba7e"

RECEIPT_TIMEOUT_S = 60


class TransactionReverted(RuntimeError):
    """A transaction reverted, either during gas estimation (never sent) or on chain (`receipt` set)."""

    def __init__(self, message: str, receipt: TxReceipt | None = None) -> None:
        super().__init__(message)
        self.receipt = receipt


@cache
def load_artifact(name: str) -> dict[str, Any]:
    """The artifact of contract `name` (cached and shared: do not mutate it)."""
    path = ARTIFACTS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no artifact {path}; run `node contracts/build.mjs`")
    artifact: dict[str, Any] = json.loads(path.read_text())
    return artifact


def organisation_key(organisation_id: str) -> str:
    """The bytes32 naming an organisation to the Disbursement contract: keccak256 of its id, 0x hex."""
    return "0x" + keccak(text=organisation_id).hex()


def spender_of(disbursement: str, organisation_id: str) -> ChecksumAddress:
    """The organisation's spender under a Disbursement contract: the CREATE2 address the contract's
    `spenderOf` computes (salt: the organisation's key; init code: OrganisationSpender's creation code),
    whether or not it is deployed yet."""
    init_code = bytes.fromhex(load_artifact("OrganisationSpender")["bytecode"][2:])
    salt = bytes.fromhex(organisation_key(organisation_id)[2:])
    digest = keccak(b"\xff" + bytes.fromhex(disbursement[2:]) + salt + keccak(init_code))
    return to_checksum_address(digest[12:])


def contract_at(w3: Web3, name: str, address: str) -> Contract:
    """A web3 contract object for the deployed contract `name` at `address`."""
    return w3.eth.contract(address=to_checksum_address(address), abi=load_artifact(name)["abi"])


def deploy_contract(w3: Web3, name: str, *constructor_args: Any, private_key: str) -> ChecksumAddress:
    """Deploy contract `name` from its artifact, signed with `private_key`; returns its address."""
    artifact = load_artifact(name)
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    receipt = send_transaction(w3, factory.constructor(*constructor_args), private_key)
    assert receipt["status"] == 1 and receipt["contractAddress"], f"deploying {name} failed: {receipt}"
    return to_checksum_address(receipt["contractAddress"])


def send_transaction(
    w3: Web3, contract_function_or_tx: ContractFunction | ContractConstructor | TxParams, private_key: str
) -> TxReceipt:
    """Sign locally, send, and wait for the receipt; raises `TransactionReverted` if it reverts.

    Accepts a bound contract call/constructor or a transaction dict; missing fields (sender, pending
    nonce, chain id, gas, fees) are filled in. A dict with an explicit `gas` skips estimation, so a
    reverting call is actually mined (useful to prove a revert moves nothing).
    """
    sender = Account.from_key(private_key).address
    # The pending nonce counts this sender's transactions already in the pool, so back-to-back sends work.
    defaults: TxParams = {
        "from": sender,
        "nonce": w3.eth.get_transaction_count(sender, "pending"),
        "chainId": w3.eth.chain_id,
    }
    try:
        if isinstance(contract_function_or_tx, ContractFunction | ContractConstructor):
            tx = contract_function_or_tx.build_transaction(defaults)
        else:
            tx = _fill_transaction(w3, {**defaults, **contract_function_or_tx})
    except ContractLogicError as exc:
        raise TransactionReverted(f"transaction from {sender} would revert: {describe_revert(exc)}") from exc
    signed = Account.sign_transaction(tx, private_key)
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT_S)
    if receipt["status"] != 1:
        raise TransactionReverted(
            f"transaction {tx_hash.to_0x_hex()} from {sender} reverted in block {receipt['blockNumber']}",
            receipt,
        )
    return receipt


def _fill_transaction(w3: Web3, tx: TxParams) -> TxParams:
    if "gas" not in tx:
        tx["gas"] = w3.eth.estimate_gas(tx)
    if "gasPrice" not in tx and "maxFeePerGas" not in tx:
        # Same policy as web3's build_transaction: tip plus twice the current base fee.
        tip = w3.eth.max_priority_fee
        tx["maxPriorityFeePerGas"] = tip
        tx["maxFeePerGas"] = Wei(tip + 2 * w3.eth.get_block("latest")["baseFeePerGas"])
    return tx


def describe_revert(exc: ContractLogicError) -> str:
    """Name a custom error from any of our contracts (web3 only gives its raw selector)."""
    data = exc.data if isinstance(exc.data, str) else None
    if data and data.startswith("0x") and len(data) >= 10:
        name = _error_signatures().get(data[2:10].lower())
        if name:
            return f"{name} (revert data {data})"
    return str(exc)


@cache
def _error_signatures() -> dict[str, str]:
    """4-byte selector (hex, no 0x) -> error signature, across all committed artifacts."""
    signatures = {}
    for path in sorted(ARTIFACTS_DIR.glob("*.json")):
        for entry in load_artifact(path.stem)["abi"]:
            if entry["type"] == "error":
                signature = abi_to_signature(entry)
                signatures[keccak(text=signature)[:4].hex()] = signature
    return signatures
