"""Drives a pending charge to `succeeded` or `failed`: one pass of sign, broadcast, reconcile or replace,
then a wait for the receipt. Used by POST /v1/charges (with a wait) and by the daemon's completion job
(without); the caller holds the charge's lease, so one executor works a charge at a time."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import structlog
from eth_account.signers.local import LocalAccount
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.chain.contracts import organisation_key, spender_of
from vip.chain.reverts import decode_revert
from vip.chain.rpc import RpcClient, RpcError
from vip.chain.token_reads import TokenState, token_state
from vip.clock import Clock
from vip.config import Settings
from vip.errors import ERROR_TEXT_LIMIT
from vip.indexer.store import final_block
from vip.payments import failures, ledger, rules, store
from vip.payments.disburser import Attempt, Disburser, DisburseRejected, Payout
from vip.payments.records import Charge, PaymentIntent

log = structlog.get_logger(__name__)

RECEIPT_POLL_S = 0.1


class ChargeExecutor:
    def __init__(self, settings: Settings, engine: AsyncEngine, rpcs: dict[str, RpcClient],
                 operator: LocalAccount, clock: Clock) -> None:
        self.settings = settings
        self.engine = engine
        self.rpcs = rpcs
        self.operator = operator
        self.clock = clock
        self._disbursers: dict[str, Disburser] = {}

    def disburser(self, network: str) -> Disburser:
        if network not in self._disbursers:
            self._disbursers[network] = Disburser(self.settings.network(network), self.rpcs[network],
                                                  self.engine, self.operator, self.settings.disbursement)
        return self._disbursers[network]

    async def advance(self, charge_id: str, wait_s: float = 0.0) -> None:
        """One pass over the charge, then wait up to `wait_s` for it to settle."""
        async with self.engine.connect() as conn:
            charge = await store.existing_charge(conn, charge_id)
            intent = await store.intent_of_charge(conn, charge)
        if charge.status != "pending":
            return
        disburser = self.disburser(charge.network)
        payout = Payout(charge.id, organisation_key(intent.organisation_id), intent.chain_intent_id,
                        intent.token_address, intent.funding_wallet, intent.recipient_wallet,
                        int(intent.amount))
        attempts = await disburser.attempts(charge.id)
        if await self._settle_if_mined(disburser, charge, payout, attempts):
            return
        try:
            if not attempts:
                if await disburser.is_disbursed(payout.chain_intent_id):
                    # Paid, yet we hold no record of it: only possible if someone else used the key.
                    await self._settle_from_log(disburser, charge, payout)
                    return
                attempts = [await disburser.sign_new(payout)]
                await disburser.broadcast(attempts[0])
            elif attempts[-1].status == "signed":
                # A crash came between recording and sending (or the node refused the fees).
                replacement = await self._broadcast_recorded(disburser, payout, attempts[-1])
                if replacement is not None:
                    attempts.append(replacement)
            elif attempts[-1].status == "broadcast":
                replacement = await self._replace_if_lost(disburser, charge, payout, attempts)
                if replacement is not None:
                    attempts.append(replacement)
        except DisburseRejected as exc:
            if exc.already_disbursed:
                await self._settle_from_log(disburser, charge, payout)
            else:
                await self._refused(disburser, charge, intent, exc)
            return
        deadline = time.monotonic() + wait_s
        while True:
            if await self._settle_if_mined(disburser, charge, payout, attempts):
                return
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(RECEIPT_POLL_S)

    async def _refused(self, disburser: Disburser, charge: Charge, intent: PaymentIntent,
                       exc: DisburseRejected) -> None:
        """The contract refused the call before anything was sent: fail the charge with its cause, unless
        the obstacle has cleared since (tried again next pass) or a USDT reset is under way (held)."""
        bound = log.bind(network=charge.network, charge_id=charge.id, payment_intent_id=intent.id)
        pull = self._pull(intent)
        state = await self._token_state(disburser, intent, exc.block or "latest")
        failure = failures.explain(decode_revert(exc.data), state, pull, failures.Sending())
        if exc.block is not None and state is not None and failures.obstacle(state, pull) is not None:
            # The obstacle the state showed at the estimate's block may be gone already (an approve, an
            # unpause since): then the next pass tries again rather than failing a charge that can now be
            # paid. Only an obstacle the state showed: a refusal it does not explain fails (decision 226).
            now = await self._token_state(disburser, intent, "latest")
            if now is not None and failures.obstacle(now, pull) is None:
                bound.info("the token's obstacle cleared since the pre-flight: trying again",
                           failure_code=failure.code)
                return
        if failure.code == failures.INSUFFICIENT_ALLOWANCE and await self._reset_in_progress(intent, state):
            # The treasury sent USDT's approve(0) of a newer intent's instructions and its raising approve
            # is not mined yet: the charge waits for it rather than failing (docs/disbursement.md, "USDT's
            # reset"), until that intent stops waiting.
            bound.info("charge held: the funding wallet's allowance is being reset for a new approval")
            return
        bound.warning("disbursement rejected before sending", failure_code=failure.code,
                      reason=exc.message[:ERROR_TEXT_LIMIT])
        await self._finish(charge, succeeded=False, tx_hash=None, failure_code=failure.code,
                           failure_message=failure.message)

    async def recheck_successes(self, network: str) -> int:
        """Re-check the network's succeeded charges whose block is not final yet: one whose transaction a
        reorg removed (no receipt on the canonical chain, or a reverted one) is reopened, and the next
        pass pays the same intent again (at most once: the contract refuses a paid intent id). Returns
        how many were reopened."""
        disburser = self.disburser(network)
        async with self.engine.connect() as conn:
            final = await final_block(conn, disburser.network)
        if final is None:  # no indexer cursor yet: the node's own depth rule
            final = await disburser.rpc.block_number() - disburser.network.finality_depth
        async with self.engine.connect() as conn:
            rows = await store.unfinal_successes(conn, network, final)
        if not rows:
            return 0
        head = await disburser.rpc.block_number()
        reopened = 0
        for row in rows:
            if row.block_number > head:
                continue  # a node behind the block (a lagging one behind a load balancer) proves nothing
            receipt = await disburser.receipt_block(row.tx_hash)
            if receipt is not None and receipt[0]:
                if receipt[1] != row.block_number:
                    async with self.engine.begin() as conn:
                        await store.move_mined(conn, row.tx_hash, receipt[1])
                continue
            async with self.engine.begin() as conn:
                if await store.reopen_charge(conn, row.charge_id, row.tx_hash):
                    reopened += 1
                    log.warning("a reorg removed a charge's transaction: paying it again", network=network,
                                charge_id=row.charge_id, tx_hash=row.tx_hash, block_number=row.block_number,
                                final_block=final)
        return reopened

    async def _broadcast_recorded(self, disburser: Disburser, payout: Payout, attempt: Attempt
                                  ) -> Attempt | None:
        """Send a recorded transaction; one the node refuses for its fees (the base fee rose past its
        cap while it waited) is replaced with the same nonce and current fees instead."""
        try:
            await disburser.broadcast(attempt)
            return None
        except RpcError as exc:
            if not any(word in exc.message.lower() for word in ("fee", "underpriced")):
                raise
        replacement = await disburser.sign_replacement(payout, attempt)
        await disburser.broadcast(replacement)
        return replacement

    async def _replace_if_lost(self, disburser: Disburser, charge: Charge, payout: Payout,
                               attempts: list[Attempt]) -> Attempt | None:
        latest = attempts[-1]
        age = (datetime.now(UTC) - latest.broadcast_at).total_seconds() if latest.broadcast_at else 0.0
        known = await disburser.known_to_node(latest.tx_hash)
        if known and age < self.settings.disbursement.replace_after_s:
            return None
        if not known and age < self.settings.disbursement.drop_grace_s:
            return None
        if await disburser.nonce_at("latest") > latest.nonce:
            # The nonce is used. If none of ours took it (checked again: it may have just been mined),
            # another transaction of the key did, and ours can never be mined: sign afresh. The contract
            # still refuses to pay the intent twice.
            if await self._settle_if_mined(disburser, charge, payout, attempts):
                return None
            attempt = await disburser.sign_new(payout)
        else:
            attempt = await disburser.sign_replacement(payout, latest)
        await disburser.broadcast(attempt)
        return attempt

    async def _settle_if_mined(self, disburser: Disburser, charge: Charge, payout: Payout,
                               attempts: list[Attempt]) -> bool:
        for attempt in attempts:
            mined = await disburser.mined(attempt.tx_hash)
            if mined is None:
                continue
            await disburser.mark_mined(mined)
            if mined.succeeded:
                await self._finish(charge, succeeded=True, tx_hash=mined.tx_hash,
                                   executed_at=mined.block_time)
            elif await disburser.is_disbursed(payout.chain_intent_id):
                await self._settle_from_log(disburser, charge, payout)  # another attempt paid it
            else:
                async with self.engine.connect() as conn:
                    intent = await store.intent_of_charge(conn, charge)
                # Replayed on the state after its block, where a pause or a blacklist that stopped it holds.
                revert = decode_revert(await disburser.revert_data(payout, mined.block_number))
                state = await self._token_state(disburser, intent, mined.block_number)
                failure = failures.explain(revert, state, self._pull(intent),
                                           failures.Sending(mined.tx_hash, mined.block_number))
                await self._finish(charge, succeeded=False, tx_hash=mined.tx_hash,
                                   failure_code=failure.code, failure_message=failure.message)
            return True
        return False

    async def _settle_from_log(self, disburser: Disburser, charge: Charge, payout: Payout) -> None:
        tx_hash = await disburser.disbursed_log_tx(payout.chain_intent_id,
                                                   await self._log_search_from(disburser, charge))
        if tx_hash is None:
            return  # the log is not visible yet; the next pass settles it
        mined = await disburser.mined(tx_hash)
        if mined is not None:
            await disburser.record_paid_by(charge.id, mined)  # ours or not, re-checked until final
        await self._finish(charge, succeeded=True, tx_hash=tx_hash,
                           executed_at=mined.block_time if mined else None)

    @staticmethod
    async def _log_search_from(disburser: Disburser, charge: Charge) -> int:
        """Where the charge's Disbursed log can first be: the block its first transaction was sent at;
        with none recorded (paid by someone else with the key), its approval's block, which came first."""
        attempts = await disburser.attempts(charge.id)
        sent = [a.sent_from_block for a in attempts if a.sent_from_block is not None]
        if sent:
            return min(sent)
        approval = await disburser.mined(charge.approval_tx_hash)
        return approval.block_number if approval else disburser.network.start_block

    def _spender(self, intent: PaymentIntent) -> str:
        """The spender the contract pulls this intent through: its organisation's, whatever the row's
        `contract_address` says (contracts/src/Disbursement.sol)."""
        return spender_of(rules.contract_of(self.settings.network(intent.network)),
                          intent.organisation_id).lower()

    def _pull(self, intent: PaymentIntent) -> failures.Pull:
        decimals = self.settings.network(intent.network).tokens[intent.token].decimals
        return failures.Pull(intent.token, decimals, intent.funding_wallet, intent.recipient_wallet,
                             self._spender(intent), int(intent.amount))

    async def _token_state(self, disburser: Disburser, intent: PaymentIntent,
                           block: int | str) -> TokenState | None:
        """The token's switches and the treasury's balance and allowance to the intent's spender at
        `block`, or None when the node does not answer (the failure is then told from the revert alone)."""
        try:
            return await token_state(disburser.rpc, intent.token_address, intent.funding_wallet,
                                     self._spender(intent), intent.recipient_wallet, block)
        except RpcError as exc:
            log.warning("token state unreadable; the failure is told from the revert alone",
                        network=intent.network, payment_intent_id=intent.id,
                        error=exc.message[:ERROR_TEXT_LIMIT])
            return None

    async def _reset_in_progress(self, intent: PaymentIntent, state: TokenState | None) -> bool:
        """The allowance is exactly 0 while a newer intent of the same funding wallet, token and spender
        whose instructions begin with approve(0) still waits for its approval: a USDT reset under way."""
        if state is None or state.allowance != 0:
            return False
        async with self.engine.connect() as conn:
            return await ledger.reset_awaited(conn, ledger.allowance_of(intent), intent.id,
                                              await self.clock.now())

    async def _finish(self, charge: Charge, *, succeeded: bool, tx_hash: str | None,
                      executed_at: datetime | None = None, failure_code: str | None = None,
                      failure_message: str | None = None) -> None:
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            done = await store.finish_charge(conn, charge.id, succeeded=succeeded, now=now, tx_hash=tx_hash,
                                             executed_at=executed_at, failure_code=failure_code,
                                             failure_message=failure_message)
        if done is not None:
            metrics.CHARGE_SECONDS.labels(charge.network).observe(
                max(0.0, (datetime.now(UTC) - charge.requested_at).total_seconds()))
            log.info("charge settled", network=charge.network, charge_id=charge.id, status=done.status,
                     tx_hash=tx_hash, failure_code=failure_code)


