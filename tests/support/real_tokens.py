"""The real USDC and USDT on a test chain: Circle's FiatTokenV2_2 behind its FiatTokenProxy and Tether's
mainnet TetherToken, deployed from the artifacts `contracts/build.mjs` compiles from the vendored sources
(contracts/vendor), with the admin roles held by impersonated addresses of their own (the proxy admin
cannot call the token through its proxy, as on mainnet). `RealTokenChain` is a ChainDriver whose USDC and
USDT are these, so the disbursement tests run unchanged against them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from eth_abi import decode, encode
from eth_utils import function_signature_to_4byte_selector, keccak, to_checksum_address
from web3 import Web3

from tests.support.chain import ChainDriver
from tests.support.paths import REPO_ROOT
from vip.devstack.anvil import AnvilNode, start_anvil
from vip.devstack.deploy import LocalContracts, deploy_local_contracts

VENDOR_DIR = REPO_ROOT / "contracts" / "vendor"
VENDOR_ARTIFACTS = VENDOR_DIR / "artifacts"

# Fixed addresses, impersonated on Anvil, for the issuers' roles.
CIRCLE_PROXY_ADMIN = "0x0000000000000000000000000000000000c1a0a1"
# Circle's owner, master minter, pauser, blacklister and minter, all one address here.
CIRCLE_ROLES = "0x0000000000000000000000000000000000c1a0a2"
CIRCLE_LOST_AND_FOUND = "0x0000000000000000000000000000000000c1a0a3"
TETHER_OWNER = "0x0000000000000000000000000000000000c1a0b1"
ISSUERS = (CIRCLE_PROXY_ADMIN, CIRCLE_ROLES, TETHER_OWNER)


@cache
def vendor_artifact(name: str) -> dict[str, Any]:
    artifact: dict[str, Any] = json.loads((VENDOR_ARTIFACTS / f"{name}.json").read_text())
    return artifact


def linked(artifact: dict[str, Any], libraries: dict[str, str]) -> str:
    """The artifact's creation bytecode with each library's address written where solc left its place."""
    raw = artifact["bytecode"][2:]
    for source, names in artifact.get("linkReferences", {}).items():
        for name, places in names.items():
            address = libraries[f"{source}:{name}"].lower().removeprefix("0x")
            for place in places:
                start, length = 2 * place["start"], 2 * place["length"]
                raw = raw[:start] + address + raw[start + length:]
    return "0x" + raw


def calldata(signature: str, types: list[str], args: list[Any]) -> str:
    return "0x" + (function_signature_to_4byte_selector(signature) + encode(types, args)).hex()


class RealTokenChain(ChainDriver):
    """A ChainDriver on `node` whose USDC is Circle's FiatTokenV2_2 (behind FiatTokenProxy) and whose
    USDT is Tether's TetherToken; the Disbursement contract is ours, as everywhere."""

    def __init__(self, node: AnvilNode) -> None:
        self.node = node
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
        accounts = [a.lower() for a in node.call("eth_accounts")]
        for issuer in ISSUERS:
            node.call("anvil_impersonateAccount", [issuer])
            node.call("anvil_setBalance", [issuer, hex(10**21)])
        ours = deploy_local_contracts(w3, node.private_keys[0], Web3.to_checksum_address(accounts[1]),
                                      Web3.to_checksum_address(accounts[0]))
        self._usdc_admin = CIRCLE_PROXY_ADMIN
        usdc, self.usdc_implementation = self._deploy_usdc()
        usdt = self._deploy_usdt()
        super().__init__(node, LocalContracts(usdc=to_checksum_address(usdc), usdt=to_checksum_address(usdt),
                                              disbursement=ours.disbursement, sprayer=ours.sprayer))
        self.minter = CIRCLE_ROLES

    # --- deployment ------------------------------------------------------------------------------------

    def receipt(self, tx: str) -> dict[str, Any]:
        """The receipt of a transaction Anvil mines at once (it may answer the send a moment before)."""
        deadline = time.monotonic() + 30
        while True:
            receipt: dict[str, Any] | None = self.node.call("eth_getTransactionReceipt", [tx])
            if receipt is not None:
                return receipt
            assert time.monotonic() < deadline, f"no receipt for {tx}"
            time.sleep(0.02)

    def _create(self, sender: str, code: str) -> str:
        tx = self.node.call("eth_sendTransaction", [{"from": sender, "data": code, "gas": hex(15_000_000)}])
        receipt = self.receipt(tx)
        assert receipt["status"] == "0x1", f"deployment from {sender} failed: {receipt}"
        return str(receipt["contractAddress"]).lower()

    def call_as(self, sender: str, to: str, data: str) -> dict[str, Any]:
        """A transaction from `sender` (a dev account or an impersonated issuer), mined; its receipt."""
        tx = self.node.call("eth_sendTransaction", [{"from": sender, "to": to, "data": data,
                                                    "gas": hex(1_000_000)}])
        return self.receipt(tx)

    def _must(self, sender: str, to: str, data: str) -> None:
        receipt = self.call_as(sender, to, data)
        assert receipt and receipt["status"] == "0x1", f"call from {sender} to {to} failed: {receipt}"

    def deploy_usdc_implementation(self) -> str:
        """A FiatTokenV2_2 implementation, with the SignatureChecker library it links deployed first."""
        library = self._create(CIRCLE_ROLES, vendor_artifact("SignatureChecker")["bytecode"])
        return self._create(CIRCLE_ROLES, linked(vendor_artifact("FiatTokenV2_2"), {
            "contracts/util/SignatureChecker.sol:SignatureChecker": library}))

    def _deploy_usdc(self) -> tuple[str, str]:
        """Circle's deployment: implementation, proxy (by the proxy admin), then the four initializers
        through the proxy, as on mainnet; the roles' address may mint 10^18 base units."""
        implementation = self.deploy_usdc_implementation()
        proxy_code = vendor_artifact("FiatTokenProxy")["bytecode"] + encode(
            ["address"], [to_checksum_address(implementation)]).hex()
        proxy = self._create(CIRCLE_PROXY_ADMIN, proxy_code)
        roles = to_checksum_address(CIRCLE_ROLES)
        self._must(CIRCLE_ROLES, proxy, calldata(
            "initialize(string,string,string,uint8,address,address,address,address)",
            ["string", "string", "string", "uint8", "address", "address", "address", "address"],
            ["USD Coin", "USDC", "USD", 6, roles, roles, roles, roles]))
        self._must(CIRCLE_ROLES, proxy, calldata("initializeV2(string)", ["string"], ["USD Coin"]))
        self._must(CIRCLE_ROLES, proxy, calldata("initializeV2_1(address)", ["address"],
                                                 [to_checksum_address(CIRCLE_LOST_AND_FOUND)]))
        self._must(CIRCLE_ROLES, proxy, calldata("initializeV2_2(address[],string)", ["address[]", "string"],
                                                 [[], "USDC"]))
        self._must(CIRCLE_ROLES, proxy, calldata("configureMinter(address,uint256)", ["address", "uint256"],
                                                 [roles, 10**18]))
        return proxy, implementation

    def _deploy_usdt(self) -> str:
        """Tether's constructor as on mainnet (initial supply to the owner, 6 decimals), fees at zero."""
        code = vendor_artifact("TetherToken")["bytecode"] + encode(
            ["uint256", "string", "string", "uint256"], [10**17, "Tether USD", "USDT", 6]).hex()
        return self._create(TETHER_OWNER, code)

    # --- the issuers' switches -------------------------------------------------------------------------

    def mint(self, token: str, to: str, amount: int) -> str:
        if token == "USDC":
            return self.send(CIRCLE_ROLES, self.tokens["USDC"], "mint", to, amount)
        # Tether issues to its owner, who transfers.
        self._must(TETHER_OWNER, self.tokens["USDT"], calldata("issue(uint256)", ["uint256"], [amount]))
        return self.send(TETHER_OWNER, self.tokens["USDT"], "transfer", to, amount)

    @staticmethod
    def _issuer(token: str) -> str:
        return CIRCLE_ROLES if token == "USDC" else TETHER_OWNER

    def pause(self, token: str) -> None:
        self._must(self._issuer(token), self.tokens[token], calldata("pause()", [], []))

    def unpause(self, token: str) -> None:
        self._must(self._issuer(token), self.tokens[token], calldata("unpause()", [], []))

    def blacklist(self, token: str, address: str) -> None:
        if token == "USDC":
            self._must(CIRCLE_ROLES, self.tokens[token], calldata("blacklist(address)", ["address"],
                                                                  [to_checksum_address(address)]))
        else:
            self._must(TETHER_OWNER, self.tokens[token], calldata("addBlackList(address)", ["address"],
                                                                  [to_checksum_address(address)]))

    def set_tether_fee(self, basis_points: int, max_fee_tokens: int) -> None:
        """Tether's transfer fee (setParams: basis points below 20, a cap below 50 tokens); 0 on mainnet."""
        self._must(TETHER_OWNER, self.tokens["USDT"], calldata(
            "setParams(uint256,uint256)", ["uint256", "uint256"], [basis_points, max_fee_tokens]))

    def upgrade_usdc(self, implementation: str) -> None:
        """The proxy admin points USDC's proxy at another implementation (state stays in the proxy)."""
        self._must(CIRCLE_PROXY_ADMIN, self.tokens["USDC"], calldata("upgradeTo(address)", ["address"],
                                                                     [to_checksum_address(implementation)]))

    def read(self, token: str, signature: str, types: list[str], args: list[Any], out: str) -> Any:
        data = calldata(signature, types, args)
        result = self.node.call("eth_call", [{"to": self.tokens[token], "data": data}, "latest"])
        return decode([out], bytes.fromhex(result[2:]))[0]

    def proxy_implementation(self) -> str:
        """The implementation USDC's proxy delegates to, from the EIP-1967-style slot Circle's proxy uses."""
        slot = "0x" + keccak(text="org.zeppelinos.proxy.implementation").hex()
        value = self.node.call("eth_getStorageAt", [self.tokens["USDC"], slot, "latest"])
        return "0x" + value[-40:]


@pytest.fixture
def real_chain() -> Iterator[RealTokenChain]:
    """A fresh Anvil node of its own (pauses, blacklists, reorgs stay inside the test) with the real USDC
    and USDT and our Disbursement contract."""
    node = start_anvil(chain_id=31337)
    try:
        yield RealTokenChain(node)
    finally:
        node.stop()


@pytest.fixture(scope="session")
def shared_real_chain() -> Iterator[RealTokenChain]:
    """One node with the real tokens for a whole session, for tests that change no issuer switch."""
    node = start_anvil(chain_id=31337)
    try:
        yield RealTokenChain(node)
    finally:
        node.stop()
