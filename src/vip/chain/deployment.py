"""The disbursement contract on a real network: deploy it (at a deterministic address where the chain has
the well-known deterministic deployment proxy, else with a plain CREATE), and check that an address holds
our contract with our operator (what `vip index` and `vip serve` do before they start).

Synchronous web3 over the network's RPC URL: these run from the command line, before any event loop or
database transaction exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from eth_abi.abi import encode
from eth_account import Account
from eth_typing import ChecksumAddress
from eth_utils import keccak, to_checksum_address
from web3 import Web3
from web3.types import TxParams, Wei

from vip.chain.contracts import contract_at, deploy_contract, load_artifact, send_transaction

# Arachnid's deterministic deployment proxy (github.com/Arachnid/deterministic-deployment-proxy), present
# at this address on most public chains (a pre-EIP-155 transaction anyone can replay) and on Anvil: it
# CREATE2s `calldata[32:]` with salt `calldata[:32]`.
DETERMINISTIC_DEPLOYER = to_checksum_address("0x4e59b44847b379578588920ca78fbf26c0b4956c")
DEFAULT_SALT = "vip.Disbursement"
ZERO = "0x" + "00" * 20


def salt_of(text: str) -> bytes:
    """The CREATE2 salt named by `text`: keccak256 of it (the same text gives the same address)."""
    return keccak(text=text)


def init_code(operator: str, owner: str) -> bytes:
    """Disbursement's creation code with its constructor arguments (operator, owner)."""
    code = bytes.fromhex(load_artifact("Disbursement")["bytecode"][2:])
    return code + encode(["address", "address"], [to_checksum_address(operator), to_checksum_address(owner)])


def create2_address(salt: bytes, code: bytes) -> ChecksumAddress:
    """Where the deterministic deployment proxy puts `code` deployed with `salt`."""
    digest = keccak(b"\xff" + bytes.fromhex(DETERMINISTIC_DEPLOYER[2:]) + salt + keccak(code))
    return to_checksum_address(digest[12:])


def runtime_code() -> bytes:
    """Our artifact's runtime code. Disbursement has no immutables (its owner and operator are storage,
    OrganisationSpender's immutable lives in each spender's own code), so the deployed code equals it
    byte for byte whatever the constructor arguments."""
    return bytes.fromhex(load_artifact("Disbursement")["deployedBytecode"][2:])


@dataclass(frozen=True)
class Deployed:
    address: ChecksumAddress
    method: Literal["create2", "create"]
    already: bool  # the address already held our contract (a second run of the same deployment)
    tx_hash: str | None
    block_number: int | None


class DeploymentRefused(RuntimeError):
    """The deployment cannot be made as asked; the message says why in one line."""


def deploy_disbursement(w3: Web3, deployer_key: str, operator: str, owner: str,
                        salt: str = DEFAULT_SALT, deterministic: bool = True) -> Deployed:
    """Deploy Disbursement(operator, owner) from `deployer_key`. With the deterministic deployment proxy on
    the chain (and `deterministic`), at the CREATE2 address fixed by the salt and the constructor
    arguments (the same on every chain with the proxy); else with a plain CREATE (the address follows the
    deployer's nonce). A CREATE2 address that already holds our contract is not deployed again."""
    code = init_code(operator, owner)
    if deterministic and w3.eth.get_code(DETERMINISTIC_DEPLOYER):
        salt_bytes = salt_of(salt)
        address = create2_address(salt_bytes, code)
        existing = bytes(w3.eth.get_code(address))
        if existing:
            if existing != runtime_code():
                raise DeploymentRefused(f"{address} already holds other code (another salt?)")
            return Deployed(address, "create2", True, None, None)
        tx: TxParams = {"to": DETERMINISTIC_DEPLOYER, "data": salt_bytes + code, "value": Wei(0)}
        receipt = send_transaction(w3, tx, deployer_key)
        if bytes(w3.eth.get_code(address)) != runtime_code():
            raise DeploymentRefused(f"the deterministic deployment proxy did not create {address}")
        return Deployed(address, "create2", False, receipt["transactionHash"].to_0x_hex(),
                        receipt["blockNumber"])
    before = w3.eth.get_block_number()
    address = deploy_contract(w3, "Disbursement", to_checksum_address(operator), to_checksum_address(owner),
                              private_key=deployer_key)
    return Deployed(address, "create", False, None, before + 1)


@dataclass(frozen=True)
class ContractState:
    address: ChecksumAddress
    ours: bool  # the deployed runtime code is our artifact's
    operator: ChecksumAddress | None
    owner: ChecksumAddress | None


def read_contract(w3: Web3, address: str) -> ContractState:
    checksummed = to_checksum_address(address)
    code = bytes(w3.eth.get_code(checksummed))
    if code != runtime_code():
        return ContractState(checksummed, False, None, None)
    contract = contract_at(w3, "Disbursement", checksummed)
    return ContractState(checksummed, True, contract.functions.operator().call(),
                         contract.functions.owner().call())


def contract_problem(w3: Web3, chain_id: int, address: str, operator: str | None) -> str | None:
    """Why `address` on this node is not our disbursement contract run by `operator` (None: any operator),
    in one sentence; None when it is."""
    actual_chain = w3.eth.chain_id
    if actual_chain != chain_id:
        return f"the RPC answers chain id {actual_chain}, the configuration says {chain_id}"
    state = read_contract(w3, address)
    if not state.ours:
        has_code = bool(w3.eth.get_code(state.address))
        return (f"{state.address} holds {'other code than' if has_code else 'no code, not'} our "
                "Disbursement contract (vip contracts deploy)")
    if operator is not None and state.operator != to_checksum_address(operator):
        return (f"{state.address}'s operator is {state.operator}, ours is {to_checksum_address(operator)} "
                "(rotate with vip contracts set-operator, docs/operations.md)")
    return None


def set_operator(w3: Web3, address: str, owner_key: str, operator: str) -> str:
    """Make `operator` the contract's operator (the owner's transaction); the mined transaction's hash."""
    contract = contract_at(w3, "Disbursement", address)
    owner = contract.functions.owner().call()
    signer = Account.from_key(owner_key).address
    if owner != signer:
        raise DeploymentRefused(f"the contract's owner is {owner}, the key given is {signer}")
    receipt = send_transaction(w3, contract.functions.setOperator(to_checksum_address(operator)), owner_key)
    return receipt["transactionHash"].to_0x_hex()
