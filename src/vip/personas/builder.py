"""Play a persona's script on a development stack: its money on the local chain, then the user on a test
clock of its own, its wallets and the payroll platform's records, through the same services the API's
routes use. The chain's time moves forward by about seven months per persona (months 1-6 after the head,
then the 2nd of the month after); the persona's clock is frozen there, so its VIP never changes, whatever
moves the chain afterwards."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from eth_utils import to_checksum_address
from sqlalchemy.ext.asyncio import AsyncEngine

from vip.accounts import test_clocks, users
from vip.chain import time_travel
from vip.chain.local_chain import LocalChain
from vip.chain.rpc import RpcClient
from vip.clock import Clock
from vip.config import Settings
from vip.connections import platform_connect
from vip.connections.income_records import IncomeRecord
from vip.connections.wallet_signin import record_wallet_connection
from vip.personas.catalogue import Persona

PLATFORM = "paystream"
FINALITY_BLOCKS = 5  # mined after the last payment: the local networks' finality depth is at most 3
UNITS = Decimal(10**6)  # USDC base units per token


@dataclass(frozen=True)
class BuiltPersona:
    persona: Persona
    user_id: str
    test_clock: str
    frozen_time: datetime
    wallets: dict[str, str]  # role -> checksummed address
    addresses: dict[str, str]  # every role of the script -> checksummed address


def month_start(moment: datetime, months_later: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months_later
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def script_time(base: datetime, month: int, day: int, hour: int = 9) -> datetime:
    """Script month 0 is the month after the chain's head when the persona is made."""
    return month_start(base, month + 1) + timedelta(days=day - 1, hours=hour)


def frozen_time(base: datetime) -> datetime:
    """The persona's clock: the 2nd of the month after script month 5 (a whole month without a payout in
    the clock's own month, so the VIP's six months are exactly script months 0-5)."""
    return month_start(base, 7) + timedelta(days=1)


def _roles(persona: Persona) -> set[str]:
    roles = set(persona.wallets) | set(persona.funded)
    for payment in persona.payments:
        roles |= {payment.sender, payment.recipient}
    return roles | {record.payer for record in persona.records}


async def build_persona(engine: AsyncEngine, clock: Clock, settings: Settings, organisation_id: str,
                        persona: Persona, network_name: str) -> BuiltPersona:
    network = time_travel.local_network(settings, network_name)
    token = network.tokens["USDC"].address
    addresses = {role: to_checksum_address("0x" + secrets.token_hex(20)) for role in sorted(_roles(persona))}
    async with RpcClient(network.name, network.rpc_url, settings.rpc) as rpc:  # type: ignore[arg-type]
        chain = LocalChain(rpc)
        base = datetime.fromtimestamp(await chain.head_time(), UTC)
        for role, amount in sorted(persona.funded.items()):
            await chain.mint(token, addresses[role], int(amount * UNITS))
        for payment in sorted(persona.payments, key=lambda p: (p.month, p.day, p.hour)):
            await chain.at(script_time(base, payment.month, payment.day, payment.hour))
            await chain.transfer(token, addresses[payment.sender], addresses[payment.recipient],
                                 int(payment.amount * UNITS))
        frozen = frozen_time(base)
        await chain.at(frozen)
        await chain.mine(FINALITY_BLOCKS)

    now = await clock.now()
    async with engine.begin() as conn:
        test_clock = await test_clocks.create_clock(conn, organisation_id, frozen, f"persona {persona.name}",
                                                    now)
    user = await users.create_user(engine, organisation_id=organisation_id,
                                   external_id=f"persona-{persona.name}-{secrets.token_hex(4)}",
                                   metadata={"persona": persona.name}, now=now, test_clock=test_clock.id)
    async with engine.begin() as conn:
        for role in persona.wallets:
            await record_wallet_connection(conn, organisation_id=organisation_id, user_id=user.id,
                                           provider="persona", network=network.name, address=addresses[role],
                                           now=now)
    records = [IncomeRecord(script_time(base, r.month, r.day).date(), r.amount, "USDC", "inbound",
                            addresses[r.payer].lower(), "Salary") for r in persona.records]
    if records:
        push = platform_connect.DirectPush(
            user_id=user.id, platform=PLATFORM, source_type="payroll", account_id=f"persona-{user.id[-8:]}",
            holder=persona.name.replace("_", " ").title(), records=records)
        await platform_connect.push_direct(engine, clock, settings, organisation_id, push)
    return BuiltPersona(persona, user.id, test_clock.id, frozen,
                        {role: addresses[role] for role in persona.wallets}, addresses)
