"""Daemon jobs of disbursement: confirm approvals from indexed Approval logs, expire intents nobody
approved in time, and execute charges (the daemon is the only process holding the operator key). Each is
a `run_steps` worker; the rows are the jobs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from vip import metrics
from vip.chain.contracts import spender_of
from vip.chain.operator import OperatorKeyMissing, load_operator
from vip.chain.rpc import RpcClient
from vip.chain.token_reads import allowances_at
from vip.clock import Clock
from vip.config import NetworkConfig, Settings
from vip.errors import ERROR_TEXT_LIMIT
from vip.ids import new_id
from vip.indexer.store import final_block
from vip.payments import ledger, rules, store
from vip.payments.charges import ChargeExecutor
from vip.run_loop import run_steps, sleep_or_stop, wake_or_stop
from vip.store.listen import listen_and_wake

log = structlog.get_logger(__name__)

CHARGES_PER_STEP = 20


class ApprovalConfirmer:
    """Confirms a network's waiting intents from the allowance ledger (vip.payments.ledger): an intent is
    confirmed only when the allowance at the final block, less what confirmed intents hold and what
    charges mined above the final block took, covers it (and the allowance now does too). Each names the
    Approval whose allowance covers it; only intents of the organisation whose spender it is."""

    def __init__(self, network: NetworkConfig, engine: AsyncEngine, rpc: RpcClient, clock: Clock) -> None:
        self.network = network
        self.engine = engine
        self.rpc = rpc
        self.clock = clock
        self.log = log.bind(network=network.name, job="approval_confirmation")

    def _spender_of(self, organisation_id: str) -> str:
        return spender_of(rules.contract_of(self.network), organisation_id)

    async def step(self) -> bool:
        now = await self.clock.now()
        async with self.engine.connect() as conn:
            final = await final_block(conn, self.network)
            oldest = await store.oldest_pending_approval(conn, now)
            metrics.JOB_OLDEST_PENDING.labels("approval_confirmation").set(
                (now - oldest).total_seconds() if oldest else 0)
            if final is None or oldest is None:
                return False
            allowances = await ledger.awaited(conn, self.network.name, now)
        confirmed = 0
        for allowance in allowances:
            confirmed += await self._confirm(allowance, final, now)
        return confirmed > 0

    async def _confirm(self, allowance: rules.Allowance, final: int, now: datetime) -> int:
        if final < 0:
            return 0  # nothing is final yet
        token, owner, spender = allowance.token, allowance.owner, allowance.spender
        # The chain's side first, with no transaction open: the allowance at the final block, and now
        # (a lowering not final yet counts at once; a raising only once it is final).
        approved, approved_now = await allowances_at(self.rpc, token, owner, spender, [final, "latest"])
        async with self.engine.begin() as conn:
            await ledger.lock(conn, allowance)
            book = await ledger.book(conn, allowance, final)
            unspent = rules.unspent(approved, approved_now, book.reserved, book.consumed_unfinal)
            # Only the intents of the organisation whose spender the approval names, whatever the rows say.
            waiting = rules.of_organisation(await ledger.waiting(conn, allowance, now), spender,
                                            self._spender_of)
            chosen = rules.confirmable(unspent, 0, waiting)
            approval = book.approval
            count = await store.confirm_intents(conn, chosen, approval.tx_hash if approval else None,
                                                approval.block_number if approval else None,
                                                approval.block_timestamp if approval else None,
                                                now) if chosen else 0
            # Past expires_at and kept alive only by approvals now final that did not cover it: expired
            # here, after confirmation and under the same lock, so no daemon expires what this one confirms.
            late = await store.expire_late(conn, allowance, final, now)
        if late:
            self.log.info("payment intents expired after their approval was final", count=late,
                          funding_wallet=owner)
        if not count:
            return 0
        self.log.info("approvals confirmed", intents=count,
                      approval_tx_hash=approval.tx_hash if approval else None,
                      allowance_final=approved, allowance_now=approved_now, reserved=book.reserved,
                      consumed_unfinal=book.consumed_unfinal, final_block=final, funding_wallet=owner)
        return count


class IntentExpirer:
    def __init__(self, engine: AsyncEngine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock

    async def step(self) -> bool:
        now = await self.clock.now()
        async with self.engine.begin() as conn:
            expired = await store.expire_due(conn, now)
        if expired:
            log.info("payment intents expired", count=expired, job="intent_expiry")
        return expired > 0


class ChargeCompleter:
    """The one executor of charges: takes pending charges that are due and leased to nobody (a new one,
    one whose last pass released it, one whose daemon died and whose lease lapsed) and advances each
    under its lease. `run` wakes at once when a charge is created (LISTEN on the channel
    `store.insert_charge` NOTIFYs; polling every `poll_s` stays the fallback) and beats this daemon's
    row in `charge_executors` (the operator's public address per network), which is how the API, which
    holds no key, knows a charge will be executed (503 otherwise)."""

    def __init__(self, executor: ChargeExecutor, engine: AsyncEngine, poll_s: float, lease_s: float,
                 stale_s: float = 15.0) -> None:
        self.executor = executor
        self.engine = engine
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.stale_s = stale_s
        self.instance_id = new_id("ex")
        self.wake = asyncio.Event()
        self.listening = asyncio.Event()  # set while the LISTEN connection is up
        self.announced = asyncio.Event()  # set once a heartbeat is written

    async def beat(self) -> None:
        """Announce this daemon as an executor of its networks' charges (the API's 503 test)."""
        async with self.engine.begin() as conn:
            await store.beat_executor(conn, self.instance_id, sorted(self.executor.rpcs),
                                      self.executor.operator.address)
        self.announced.set()

    async def step(self) -> bool:
        for network in sorted(self.executor.rpcs):
            try:
                await self.executor.recheck_successes(network)
            except Exception:
                log.exception("re-checking succeeded charges failed", network=network,
                              job="charge_completion")
                metrics.JOB_ERRORS.labels("charge_completion", "recheck").inc()
        async with self.engine.begin() as conn:
            # Only charges this daemon can execute: those of its own networks (with its operator key).
            networks = sorted(self.executor.rpcs)
            oldest = await store.oldest_pending_charge(conn, networks)
            metrics.JOB_OLDEST_PENDING.labels("charge_completion").set(
                (datetime.now(UTC) - oldest).total_seconds() if oldest else 0)
            ids = await store.claim_due_charges(conn, networks, self.lease_s, CHARGES_PER_STEP)
        if not ids:
            return False
        await asyncio.gather(*(self._advance(charge_id) for charge_id in ids))
        return True

    async def _advance(self, charge_id: str) -> None:
        try:
            await self.executor.advance(charge_id)
        except Exception:
            log.exception("charge step failed", charge_id=charge_id, job="charge_completion")
            metrics.JOB_ERRORS.labels("charge_completion", "advance").inc()
        finally:
            async with self.engine.begin() as conn:
                await store.release_charge(conn, charge_id, self.poll_s)

    async def _step_or_wait(self, stop: asyncio.Event) -> bool:
        # Cleared before the claim: a charge committed during the step sets it again and is not missed.
        self.wake.clear()
        if await self.step():
            return True
        await wake_or_stop(self.wake, stop, self.poll_s)
        return False

    async def _beat_until(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.beat()
            except Exception as exc:  # the database is away: the API answers 503 meanwhile, which is true
                log.warning("charge executor heartbeat failed", error=str(exc)[:ERROR_TEXT_LIMIT],
                            job="charge_completion")
            await sleep_or_stop(stop, self.stale_s / 3)

    async def run(self, stop: asyncio.Event) -> None:
        helpers = [asyncio.create_task(listen_and_wake(self.engine, store.CHARGE_DUE_CHANNEL, stop, self.wake,
                                                       self.listening, log), name="charges-listen"),
                   asyncio.create_task(self._beat_until(stop), name="charges-heartbeat")]
        try:
            await run_steps(lambda: self._step_or_wait(stop), stop, network=None, task="charge_completion",
                            idle_s=0.0, log=log)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            try:
                async with self.engine.begin() as conn:
                    await store.forget_executor(conn, self.instance_id)
            except Exception:
                log.warning("could not withdraw the charge executor row; it goes stale",
                            job="charge_completion")


def payment_tasks(settings: Settings, engine: AsyncEngine, rpcs: dict[str, RpcClient], clock: Clock,
                  stop: asyncio.Event,
                  gates: dict[str, asyncio.Event] | None = None) -> list[asyncio.Task[None]]:
    """The disbursement workers for the networks this daemon follows that have a disbursement contract.
    With the operator key, `gates["charge_executor"]` is set once this daemon is registered as the
    executor of its networks' charges (its readiness waits for it: a charge sent before would be 503)."""
    networks = [settings.network(name) for name in rpcs if settings.network(name).disbursement_contract]
    if not networks:
        return []
    config = settings.disbursement
    tasks = []
    for network in networks:
        confirmer = ApprovalConfirmer(network, engine, rpcs[network.name], clock)
        tasks.append(asyncio.create_task(run_steps(
            confirmer.step, stop, network=network.name, task="approval_confirmation",
            idle_s=min(config.poll_interval_s, network.poll_interval_s), log=confirmer.log),
            name=f"approvals-{network.name}"))
    expirer = IntentExpirer(engine, clock)
    tasks.append(asyncio.create_task(run_steps(expirer.step, stop, network=None, task="intent_expiry",
                                               idle_s=config.poll_interval_s, log=log), name="intent-expiry"))
    try:
        operator = load_operator(config)
    except OperatorKeyMissing as exc:
        log.warning("charges will not be executed by this daemon", reason=str(exc))
        return tasks
    executor = ChargeExecutor(settings, engine, {n.name: rpcs[n.name] for n in networks}, operator, clock)
    completer = ChargeCompleter(executor, engine, config.poll_interval_s, config.lease_s,
                                config.executor_stale_s)
    if gates is not None:
        gates["charge_executor"] = completer.announced
    tasks.append(asyncio.create_task(completer.run(stop), name="charge-completion"))
    log.info("disbursement jobs running", networks=[n.name for n in networks], operator=operator.address)
    return tasks


