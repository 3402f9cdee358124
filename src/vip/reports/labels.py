"""Writing a verification's transfer labels, for the VIP job and the labelling job alike: the labels of
every wallet, one `fraud.flagged` event per newly flagged transfer, and the flags stored before (a fraud
flag, once written, is never taken back: decision 163)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from vip.formats import iso
from vip.reports import inputs as inputs
from vip.store.outbox import record_event
from vip.store.tables import transfer_labels
from vip.verification.model import CIRCULAR_FLOW, FRAUD_TYPES, WASH_TRADE, TransferKey
from vip.verification.pipeline import Finding, Outcome, Wallet
from vip.verification.profile import usd

FRAUD_DETAILS = {
    "wash_trade": "the user's own money came back through one intermediary, or value returned to the "
                  "counterparty it came from within the wash-trade window",
    "circular": "the user's own money left the wallet and came back through two or more intermediaries",
}



async def lock_user_labels(conn: AsyncConnection, user_id: str) -> None:
    """Serialise the label writes of one user (the VIP job and the labelling job, several daemons): two
    upserts of one wallet's labels in different orders would deadlock, and the later run has read more."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                       {"k": f"labels:{user_id}"})


async def try_lock_user_labels(conn: AsyncConnection, user_id: str) -> bool:
    return bool(await conn.scalar(text("SELECT pg_try_advisory_xact_lock(hashtextextended(:k, 0))"),
                                  {"k": f"labels:{user_id}"}))


async def prior_flags(conn: AsyncConnection, wallets: Sequence[Wallet]
                      ) -> dict[tuple[str, TransferKey], tuple[str, ...]]:
    """The wash and circular flags stored on the wallets' transfers, by (wallet address, transfer): the
    pipeline keeps them (a flagged transfer never matches a record), so no run turns fraud into income."""
    if not wallets:
        return {}
    lbl = transfer_labels
    rows = await conn.execute(select(lbl.c.network, lbl.c.tx_hash, lbl.c.log_index, lbl.c.wallet_address,
                                     lbl.c.fraud_flags).where(
        tuple_(lbl.c.network, lbl.c.wallet_address).in_([(w.network, w.address) for w in wallets]),
        lbl.c.fraud_flags.overlap([WASH_TRADE, CIRCULAR_FLOW])))
    return {(r.wallet_address, (r.network, r.tx_hash, r.log_index)):
            tuple(f for f in r.fraud_flags if f in FRAUD_TYPES) for r in rows}


async def store_labels(conn: AsyncConnection, *, user_id: str, organisation_id: str, outcome: Outcome,
                       now: datetime) -> None:
    """Upsert every label of the outcome; `fraud.flagged` for each transfer flagged for the first time."""
    flagged: dict[Wallet, list[Finding]] = {}
    for finding in outcome.findings:
        flagged.setdefault(finding.wallet, []).append(finding)
    for wallet, labels in outcome.labels.items():
        findings = flagged.get(wallet, [])
        before = await inputs.existing_flags(conn, wallet, [f.transfer.key for f in findings])
        await inputs.write_labels(conn, wallet, labels, now)
        for f in findings:
            if f.code in before.get(f.transfer.key, ()):
                continue  # flagged by an earlier run: one event per flagged transfer
            fraud_type = FRAUD_TYPES[f.code]
            await record_event(conn, "fraud.flagged", {
                "user_id": user_id, "wallet_id": wallet.id, "tx_hash": f.transfer.tx_hash,
                "fraud_type": fraud_type, "amount_usd": usd(f.transfer.usd()), "flagged_at": iso(now),
                "details": FRAUD_DETAILS[fraud_type]},
                created_at=now, organisation_id=organisation_id)
