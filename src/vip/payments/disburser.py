"""Writes disburse() transactions for charges: EIP-1559 fees, nonces allocated in PostgreSQL, each signed
transaction recorded before it is broadcast, receipts reconciled, dropped transactions replaced with the
same nonce.

Its part of exactly once (owned by `vip.payments.service`, whose docstring lists the three locks): a
crash anywhere leaves either no record (nothing was sent) or a record of every transaction that may have
been sent, so a restarted executor always finds what it did; and a refusal by the contract of an
intent it has paid is told apart (`DisburseRejected.already_disbursed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import structlog
from eth_abi.abi import encode
from eth_account.signers.local import LocalAccount
from eth_account.types import TransactionDictType
from eth_typing import HexStr
from eth_utils import function_signature_to_4byte_selector, to_checksum_address
from sqlalchemy import Row, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vip.chain.contracts import DISBURSED_TOPIC
from vip.chain.fees import Fees, bumped, fees_for
from vip.chain.reverts import decode_revert
from vip.chain.rpc import RevertedError, RpcClient, RpcError
from vip.config import DisbursementConfig, NetworkConfig
from vip.errors import ERROR_TEXT_LIMIT
from vip.payments.rules import TX_EXTERNAL
from vip.store.tables import charges, disbursement_transactions, operator_nonces

log = structlog.get_logger(__name__)

DISBURSE_SELECTOR = function_signature_to_4byte_selector(
    "disburse(bytes32,bytes32,address,address,address,uint256)")
DISBURSED_SELECTOR = function_signature_to_4byte_selector("disbursed(bytes32)")
GAS_HEADROOM_PERCENT = 25  # estimates are exact for the state they ran on; leave room for drift
GWEI = 10**9
_ALREADY_SENT = ("already known", "already imported", "known transaction", "nonce too low",
                 "replacement transaction underpriced")


class DisburseRejected(Exception):
    """The node refused the call before anything was sent (a revert in estimation, say); `data` is the
    revert data when the node gave it (decoded by vip.chain.reverts), `block` the block the estimate ran
    on (the token's state there explains the refusal)."""

    def __init__(self, message: str, data: str | None = None, block: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.block = block
        self.already_disbursed = (decode_revert(data).error == "AlreadyDisbursed" if data
                                  else "AlreadyDisbursed" in message or "0x9dca1fad" in message)


@dataclass(frozen=True)
class Payout:
    """What one charge asks the contract to do."""

    charge_id: str
    organisation_key: str  # 0x bytes32: the contract pulls through this organisation's spender only
    chain_intent_id: str  # 0x bytes32
    token: str
    funding_wallet: str
    recipient: str
    amount: int


@dataclass(frozen=True)
class Attempt:
    tx_hash: str
    nonce: int
    raw_tx: str
    gas_limit: int
    fees: Fees
    status: str
    broadcast_at: datetime | None
    sent_from_block: int | None = None  # the node's latest block just before signing


@dataclass(frozen=True)
class Mined:
    tx_hash: str
    succeeded: bool
    block_number: int
    block_time: datetime


def _attempt(row: Row[Any]) -> Attempt:
    return Attempt(row.tx_hash, row.nonce, row.raw_tx, row.gas_limit,
                   Fees(int(row.max_fee_per_gas), int(row.max_priority_fee_per_gas)), row.status,
                   row.broadcast_at, row.sent_from_block)


class Disburser:
    """The operator's transactions on one network."""

    def __init__(self, network: NetworkConfig, rpc: RpcClient, engine: AsyncEngine, operator: LocalAccount,
                 config: DisbursementConfig) -> None:
        if not network.disbursement_contract:
            raise ValueError(f"network {network.name} has no disbursement contract")
        self.network = network
        self.rpc = rpc
        self.engine = engine
        self.operator = operator
        self.sender = operator.address.lower()
        self.contract = network.disbursement_contract
        self.config = config
        # The network's own cap when it has one (an L2's fees are a thousandth of ethereum's: the
        # service-wide cap would let a spike there cost far more than it should; decision 210).
        self.fee_cap = int((network.max_fee_gwei or config.max_fee_gwei) * GWEI)
        self.min_tip = int(network.min_priority_fee_gwei * GWEI)

    # --- reads -----------------------------------------------------------------------------------------

    async def attempts(self, charge_id: str) -> list[Attempt]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(disbursement_transactions).where(
                disbursement_transactions.c.charge_id == charge_id,
                disbursement_transactions.c.status.not_in(TX_EXTERNAL))
                .order_by(disbursement_transactions.c.created_at, disbursement_transactions.c.nonce))
            return [_attempt(r) for r in rows]

    async def is_disbursed(self, chain_intent_id: str) -> bool:
        data = "0x" + (DISBURSED_SELECTOR + bytes.fromhex(chain_intent_id[2:])).hex()
        result = await self.rpc.call("eth_call", [{"to": self.contract, "data": data}, "latest"])
        return int(result, 16) != 0

    async def disbursed_log_tx(self, chain_intent_id: str, from_block: int) -> str | None:
        """The transaction that paid an intent, from the contract's Disbursed log at or after `from_block`
        (the block we sent it at: a search from the network's start would cost a hosted provider
        thousands of calls, or be refused)."""
        logs = await self.rpc.call("eth_getLogs", [{
            "address": self.contract, "fromBlock": hex(from_block), "toBlock": "latest",
            "topics": [DISBURSED_TOPIC, chain_intent_id]}])
        live = [lg for lg in logs or [] if not lg.get("removed")]
        return live[0]["transactionHash"].lower() if live else None

    async def mined(self, tx_hash: str) -> Mined | None:
        receipt = await self.rpc.call("eth_getTransactionReceipt", [tx_hash])
        if not receipt or receipt.get("blockNumber") is None:
            return None
        number = int(receipt["blockNumber"], 16)
        block = await self.rpc.call("eth_getBlockByNumber", [hex(number), False])
        return Mined(tx_hash, int(receipt["status"], 16) == 1, number,
                     datetime.fromtimestamp(int(block["timestamp"], 16), UTC))

    async def receipt_block(self, tx_hash: str) -> tuple[bool, int] | None:
        """(succeeded, block number) of a transaction's receipt on the node's canonical chain, or None when
        no canonical block holds it (never mined, or removed by a reorg)."""
        receipt = await self.rpc.call("eth_getTransactionReceipt", [tx_hash])
        if not receipt or receipt.get("blockNumber") is None:
            return None
        return int(receipt["status"], 16) == 1, int(receipt["blockNumber"], 16)

    async def known_to_node(self, tx_hash: str) -> bool:
        return await self.rpc.call("eth_getTransactionByHash", [tx_hash]) is not None

    async def nonce_at(self, tag: str) -> int:
        return int(await self.rpc.call("eth_getTransactionCount", [self.operator.address, tag]), 16)

    # --- writes ----------------------------------------------------------------------------------------

    def _calldata(self, payout: Payout) -> str:
        args = encode(["bytes32", "bytes32", "address", "address", "address", "uint256"], [
            bytes.fromhex(payout.organisation_key[2:]), bytes.fromhex(payout.chain_intent_id[2:]),
            to_checksum_address(payout.token),
            to_checksum_address(payout.funding_wallet), to_checksum_address(payout.recipient), payout.amount])
        return "0x" + (DISBURSE_SELECTOR + args).hex()

    async def market_fees(self) -> Fees:
        block = await self.rpc.call("eth_getBlockByNumber", ["latest", False])
        tip = int(await self.rpc.call("eth_maxPriorityFeePerGas"), 16)
        return fees_for(int(block.get("baseFeePerGas") or "0x0", 16), tip, self.fee_cap, self.min_tip)

    async def estimate_gas(self, payout: Payout, block: int | None = None) -> int:
        """Gas for disburse(), which also proves the call would succeed (a revert raises), on `block` when
        given (so a refusal is explained from the same state), else on the node's latest."""
        params: list[object] = [{"from": self.operator.address, "to": self.contract,
                                 "data": self._calldata(payout)}]
        if block is not None:
            params.append(hex(block))
        try:
            gas = await self.rpc.call("eth_estimateGas", params, max_attempts=1)
        except RpcError as exc:
            if isinstance(exc, RevertedError) or "revert" in exc.message.lower():
                raise DisburseRejected(exc.message, exc.data, block) from exc
            raise
        return int(gas, 16) * (100 + GAS_HEADROOM_PERCENT) // 100

    async def revert_data(self, payout: Payout, block: int) -> str | None:
        """The revert data of the payout's call replayed on the state after `block` (where a reverted
        transaction of it was mined, so its cause, a pause or a blacklist, still holds), or None."""
        try:
            await self.rpc.call("eth_call", [{"from": self.operator.address, "to": self.contract,
                                              "data": self._calldata(payout)}, hex(block)], max_attempts=2)
        except RevertedError as exc:
            return exc.data
        except RpcError:
            return None
        return None

    async def sign_new(self, payout: Payout) -> Attempt:
        """Estimate, take the next nonce and sign; the signed transaction is recorded (status `signed`)
        in the same transaction as the nonce is taken, before anyone can broadcast it."""
        sent_from = await self.rpc.block_number()
        gas = await self.estimate_gas(payout, sent_from)
        fees = await self.market_fees()
        pending = await self.nonce_at("pending")
        async with self.engine.begin() as conn:
            await conn.execute(pg_insert(operator_nonces).values(
                network=self.network.name, sender=self.sender, next_nonce=pending).on_conflict_do_nothing())
            stored: int = (await conn.execute(select(operator_nonces.c.next_nonce).where(
                operator_nonces.c.network == self.network.name, operator_nonces.c.sender == self.sender,
            ).with_for_update())).scalar_one()
            # The node's pending count, skipping the nonces our own transactions hold (signed or sent for
            # a pending charge, or mined in a block a reorg may have removed: its charge is re-checked and
            # re-sends that nonce). A nonce nobody holds is reused, so a nonce a reorg or a dropped
            # transaction lost never leaves the next ones stuck behind a gap (decision 166).
            held = await _held_nonces(conn, self.network.name, self.sender, pending)
            nonce = pending
            while nonce in held:
                nonce += 1
            attempt = await self._record(conn, payout, nonce, gas, fees, sent_from)
            await conn.execute(update(operator_nonces).where(
                operator_nonces.c.network == self.network.name, operator_nonces.c.sender == self.sender,
            ).values(next_nonce=max(stored, nonce + 1)))
        log.info("disbursement signed", network=self.network.name, charge_id=payout.charge_id,
                 tx_hash=attempt.tx_hash, nonce=nonce)
        return attempt

    async def sign_replacement(self, payout: Payout, previous: Attempt) -> Attempt:
        """The same call with the same nonce and higher fees: whichever of the two is mined, the other
        can never be, so a replacement never pays twice."""
        fees = bumped(previous.fees, await self.market_fees(), self.config.fee_bump_percent, self.fee_cap)
        async with self.engine.begin() as conn:
            attempt = await self._record(conn, payout, previous.nonce, previous.gas_limit, fees,
                                         previous.sent_from_block)
            await conn.execute(update(disbursement_transactions).where(
                disbursement_transactions.c.tx_hash == previous.tx_hash).values(status="replaced"))
        log.warning("disbursement replaced", network=self.network.name, charge_id=payout.charge_id,
                    previous=previous.tx_hash, tx_hash=attempt.tx_hash, nonce=previous.nonce)
        return attempt

    async def _record(self, conn: AsyncConnection, payout: Payout, nonce: int, gas: int, fees: Fees,
                      sent_from_block: int | None) -> Attempt:
        tx: TransactionDictType = {
            "type": 2, "chainId": self.network.chain_id, "nonce": nonce, "to": HexStr(self.contract),
            "value": 0, "data": HexStr(self._calldata(payout)), "gas": gas,
            "maxFeePerGas": fees.max_fee_per_gas, "maxPriorityFeePerGas": fees.max_priority_fee_per_gas,
        }
        signed = self.operator.sign_transaction(tx)
        tx_hash = "0x" + signed.hash.hex().removeprefix("0x")
        raw = "0x" + signed.raw_transaction.hex().removeprefix("0x")
        await conn.execute(disbursement_transactions.insert().values(
            tx_hash=tx_hash, charge_id=payout.charge_id, network=self.network.name, sender=self.sender,
            nonce=nonce, raw_tx=raw, gas_limit=gas, max_fee_per_gas=Decimal(fees.max_fee_per_gas),
            max_priority_fee_per_gas=Decimal(fees.max_priority_fee_per_gas), status="signed",
            sent_from_block=sent_from_block))
        return Attempt(tx_hash, nonce, raw, gas, fees, "signed", None, sent_from_block)

    async def broadcast(self, attempt: Attempt) -> None:
        """Send a recorded transaction; a node that already has it (or its nonce) is not an error: the
        receipt decides."""
        try:
            await self.rpc.call("eth_sendRawTransaction", [attempt.raw_tx], max_attempts=3)
        except RpcError as exc:
            if not any(marker in exc.message.lower() for marker in _ALREADY_SENT):
                raise
            log.info("disbursement already with the node", network=self.network.name,
                     tx_hash=attempt.tx_hash, reply=exc.message[:ERROR_TEXT_LIMIT])
        async with self.engine.begin() as conn:
            await conn.execute(update(disbursement_transactions).where(
                disbursement_transactions.c.tx_hash == attempt.tx_hash,
                disbursement_transactions.c.status == "signed",
            ).values(status="broadcast", broadcast_at=func.now()))

    async def mark_mined(self, mined: Mined) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(update(disbursement_transactions).where(
                disbursement_transactions.c.tx_hash == mined.tx_hash,
                disbursement_transactions.c.status.not_in(TX_EXTERNAL)).values(
                status="mined" if mined.succeeded else "reverted", block_number=mined.block_number))

    async def record_paid_by(self, charge_id: str, mined: Mined) -> None:
        """The transaction that paid the charge, as mined: ours is marked so; one we did not sign (another
        tool holding the operator key) is recorded as `external` with what the node says of it, so that a
        reorg removing it is caught as one removing ours would be (decision 211)."""
        async with self.engine.connect() as conn:
            ours = await conn.scalar(select(disbursement_transactions.c.status).where(
                disbursement_transactions.c.tx_hash == mined.tx_hash))
        if ours is not None and ours not in TX_EXTERNAL:
            await self.mark_mined(mined)
            return
        tx = await self.rpc.call("eth_getTransactionByHash", [mined.tx_hash])
        if tx is None:
            return  # gone since its receipt was read (a reorg): the next re-check settles the charge
        fee = int(tx.get("maxFeePerGas") or tx["gasPrice"], 16)
        values = {"network": self.network.name, "charge_id": charge_id, "sender": tx["from"].lower(),
                  "nonce": int(tx["nonce"], 16), "raw_tx": "",  # never ours to send again
                  "gas_limit": int(tx["gas"], 16), "max_fee_per_gas": Decimal(fee),
                  "max_priority_fee_per_gas": Decimal(int(tx.get("maxPriorityFeePerGas") or hex(fee), 16)),
                  "status": "external", "block_number": mined.block_number}
        async with self.engine.begin() as conn:
            await conn.execute(pg_insert(disbursement_transactions).values(tx_hash=mined.tx_hash, **values)
                               .on_conflict_do_update(index_elements=["tx_hash"], set_={
                                   "status": "external", "block_number": mined.block_number}))


async def _held_nonces(conn: AsyncConnection, network: str, sender: str, from_nonce: int) -> set[int]:
    """Nonces from `from_nonce` up that a transaction of ours holds: signed or sent for a pending charge,
    or mined (at or above the node's pending count only when a reorg removed its block)."""
    dt = disbursement_transactions
    live = dt.c.status.in_(("signed", "broadcast")) & (charges.c.status == "pending")
    return set(await conn.scalars(select(dt.c.nonce).join(charges, charges.c.id == dt.c.charge_id).where(
        dt.c.network == network, dt.c.sender == sender, dt.c.nonce >= from_nonce,
        (dt.c.status == "mined") | live)))

