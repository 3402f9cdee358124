"""Drive a real Anvil node for tests: deploy the tokens, make transfers/approvals, read ground truth."""

from __future__ import annotations

import random
from dataclasses import dataclass

from eth_abi import encode
from web3 import Web3

from tests.support.platforms import load_platforms
from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.config import IndexerConfig, NetworkConfig, RpcConfig, Settings, TokenConfig
from vip.devstack.anvil import AnvilNode
from vip.devstack.deploy import LocalContracts, deploy_local_contracts
from vip.indexer.decode import parse_token_log

_SELECTORS = {
    "transfer": bytes.fromhex("a9059cbb"),
    "approve": bytes.fromhex("095ea7b3"),
    "mint": bytes.fromhex("40c10f19"),
}


@dataclass(frozen=True)
class LogRow:
    """One token log as both the node and the database can describe it."""

    kind: str
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    token_address: str
    party_a: str
    party_b: str
    amount: int


class ChainDriver:
    """Transactions from Anvil's unlocked dev accounts, sent over plain JSON-RPC (fast, no signing)."""

    def __init__(self, node: AnvilNode, contracts: LocalContracts | None = None) -> None:
        self.node = node
        self.w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 30}))
        self.accounts = [a.lower() for a in node.call("eth_accounts")]
        if contracts is None:
            contracts = deploy_local_contracts(self.w3, node.private_keys[0],
                                               Web3.to_checksum_address(self.accounts[1]),
                                               Web3.to_checksum_address(self.accounts[0]))
        self.contracts = contracts
        self.tokens = {"USDC": contracts.usdc.lower(), "USDT": contracts.usdt.lower()}
        self.minter = self.accounts[0]
        self.automine = True  # Anvil's default; `set_automine` keeps it true to the node

    # --- transactions --------------------------------------------------------------------------------

    def send(self, sender: str, to: str, selector: str, *args) -> str:
        types = ["address", "uint256"]
        data = "0x" + (_SELECTORS[selector] + encode(types, list(args))).hex()
        tx = {"from": sender, "to": to, "data": data, "gas": hex(200_000)}
        if not self.automine:
            return self.node.call("eth_sendTransaction", [tx])
        # Automining, Anvil answers eth_sendTransaction before the block holding it is on the chain (a head
        # read right after may still be the block before): the sync form answers once it is mined.
        return self.node.call("eth_sendTransactionSync", [tx])["transactionHash"]

    def mint(self, token: str, to: str, amount: int) -> str:
        return self.send(self.minter, self.tokens[token], "mint", to, amount)

    def transfer(self, token: str, sender: str, to: str, amount: int) -> str:
        return self.send(sender, self.tokens[token], "transfer", to, amount)

    def approve(self, token: str, owner: str, spender: str, amount: int) -> str:
        return self.send(owner, self.tokens[token], "approve", spender, amount)

    def set_automine(self, enabled: bool) -> None:
        self.node.call("evm_setAutomine", [enabled])
        self.automine = enabled

    def mine(self, blocks: int = 1) -> None:
        self.node.call("anvil_mine", [hex(blocks)])

    def head(self) -> tuple[int, str]:
        block = self.node.call("eth_getBlockByNumber", ["latest", False])
        return int(block["number"], 16), block["hash"].lower()

    def fund(self, holders: list[str], amount: int = 10**15) -> None:
        """Mint both tokens to every holder, in one block."""
        self.set_automine(False)
        for holder in holders:
            for token in self.tokens:
                self.mint(token, holder, amount)
        self.mine()
        self.set_automine(True)

    def random_activity(self, rng: random.Random, count: int, senders: list[str], recipients: list[str],
                        per_block: int = 4) -> None:
        """`count` random transfers and approvals of both tokens, several per block. Approvals are set to 0
        first when needed, as USDT requires."""
        self.set_automine(False)
        for i in range(count):
            token = rng.choice(list(self.tokens))
            sender = rng.choice(senders)
            other = rng.choice([r for r in recipients if r != sender])
            if rng.random() < 0.15:
                self.approve(token, sender, other, 0)
                self.approve(token, sender, other, rng.randint(1, 10**9))
            else:
                self.transfer(token, sender, other, rng.randint(1, 10**9))
            if (i + 1) % per_block == 0:
                self.mine()
        self.mine()
        self.set_automine(True)

    # --- ground truth ----------------------------------------------------------------------------------

    def token_logs(self, watched: set[str] | None, to_block: int | None = None) -> set[LogRow]:
        """Every Transfer/Approval log of the tokens on the node's canonical chain (for `watched`
        addresses only, unless None)."""
        end = hex(to_block) if to_block is not None else "latest"
        raw = self.node.call("eth_getLogs", [{"fromBlock": "0x0", "toBlock": end,
                                              "address": list(self.tokens.values()),
                                              "topics": [[TRANSFER_TOPIC, APPROVAL_TOPIC]]}])
        rows = set()
        for item in raw:
            lg = parse_token_log(item)
            if lg is None:
                continue
            if watched is not None and lg.party_a not in watched and lg.party_b not in watched:
                continue
            rows.add(LogRow(lg.kind, lg.tx_hash, lg.log_index, lg.block_number, lg.block_hash,
                            lg.token_address, lg.party_a, lg.party_b, lg.amount))
        return rows


def local_network(node_url: str, chain_id: int, contracts: LocalContracts, *, name: str = "local",
                  finality_depth: int = 5, mode: str = "watched", max_block_range: int = 1000,
                  initial_block_range: int = 20, history_initial_block_range: int | None = None,
                  history_max_block_range: int | None = None, finality: str = "depth",
                  head_margin: int = 0) -> NetworkConfig:
    """A network on the local node; history ranges default to the follower's (tests size both small)."""
    return NetworkConfig(
        name=name, chain_id=chain_id, rpc_url=node_url, local=True, finality_depth=finality_depth,
        finality=finality, head_margin=head_margin,
        poll_interval_s=0.05, max_block_range=max_block_range, initial_block_range=initial_block_range,
        history_initial_block_range=history_initial_block_range or initial_block_range,
        history_max_block_range=history_max_block_range or max_block_range,
        mode=mode, start_block=0, disbursement_contract=contracts.disbursement,
        tokens={"USDC": TokenConfig(address=contracts.usdc), "USDT": TokenConfig(address=contracts.usdt)},
    )


def indexer_settings(*networks: NetworkConfig, timeout_s: float = 2.0) -> Settings:
    """Settings tuned for tests: quick polls, short time-outs and backoffs; the shipped OAuth platforms."""
    return Settings(
        networks={n.name: n for n in networks},
        rpc=RpcConfig(timeout_s=timeout_s, max_attempts=4, backoff_base_s=0.01, backoff_cap_s=0.2,
                      max_requests_per_s=2000),
        indexer=IndexerConfig(lag_grace_s=0.5, max_logs_per_batch=5000),
        platforms=load_platforms(),
    )
