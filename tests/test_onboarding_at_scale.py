"""200,000 wallets added at once through the public paths (`vip watch --file`, which COPYs them in one
transaction, and wallet sign-ins through the API) while blocks keep arriving behind a hosted provider's
stand-in: load-balanced nodes of which three trail the head (answering eth_getLogs past their heads with
nothing, one also lacking its newest block's logs), a 10-item batch cap, methods weighed in Alchemy's
compute units under a per-second plan, and no head margin. Every canonical row of the watched addresses is
stored and none other, the cursor reaches the head, no batch passes the cap, and the daemon spends no
more than its configured budget."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
from dataclasses import replace

from eth_account import Account
from sqlalchemy import func, select

from tests.support.api import checked_api
from tests.support.chain import ChainDriver, indexer_settings, local_network
from tests.support.indexer import db_rows, running_indexer
from tests.support.wallets import connect
from tests.test_provider_standin import wait_indexed
from vip import metrics
from vip.config import load_settings
from vip.devstack.provider import PROFILES, ProviderStandIn
from vip.store.tables import address_balances

WALLETS = 200_000
BUDGET_CU = 1_500  # the daemon's budget per second, in compute units (config: rpc_budget_per_s)
PLAN_CU = 2_000  # what the stand-in's plan takes per second before answering 429


def network_overlay(name: str, chain: ChainDriver) -> str:
    """The network as an operator's overlay names it, for `vip watch` (which only needs to know it)."""
    return "\n".join([f"[networks.{name}]", f"chain_id = {chain.node.chain_id}", "finality_depth = 4",
                      f'rpc_url = "{chain.node.rpc_url}"', "local = true", "start_block = 0",
                      *(line for symbol, address in chain.tokens.items()
                        for line in (f"[networks.{name}.tokens.{symbol}]", f'address = "{address}"'))]) + "\n"


def keep_mining(chain: ChainDriver, stop: threading.Event, actors: list[str], newcomers: list[str]) -> int:
    """Blocks with transfers and approvals among the actors and to a few of the new wallets, a few a
    second, until `stop`; returns how many rounds."""
    rng = random.Random(2222)
    rounds = 0
    while not stop.is_set():
        chain.random_activity(rng, 4, actors, actors + newcomers, per_block=2)
        rounds += 1
        stop.wait(0.15)
    return rounds


async def wait_balances(engine, rows: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        async with engine.connect() as conn:
            stored = await conn.scalar(select(func.count()).select_from(address_balances))
        if stored == rows:
            return
        assert time.monotonic() < deadline, f"{stored} balance rows of {rows} after {timeout_s} s"
        await asyncio.sleep(0.5)


def doubts() -> float:
    return sum(metrics.DOUBTED_BLOCKS.labels("local", reason)._value.get()
               for reason in ("node_behind", "logs_missing"))


async def test_200000_wallets_at_once_while_blocks_arrive_behind_lagging_nodes(
        chain: ChainDriver, database_url, engine, aiohttp_client, tmp_path):
    rng = random.Random(22)
    actors = chain.accounts[2:9]
    chain.fund(actors)
    chain.random_activity(rng, 60, actors, actors, per_block=3)  # history the backfill must bring in
    signers = [Account.from_key(chain.node.private_keys[i]) for i in (7, 8)]  # actors with history
    newcomers = ["0x" + f"{0x0b0a_0000_0000 + i:040x}" for i in range(WALLETS - 7)]
    by_file = actors[:5] + newcomers  # 199,998 through `vip watch`, 2 through sign-in
    watched = {*by_file, *(s.address.lower() for s in signers)}
    assert len(watched) == WALLETS
    path = tmp_path / "wallets.txt"
    path.write_text("\n".join(by_file) + "\n")
    overlay = tmp_path / "network.toml"
    overlay.write_text(network_overlay("local", chain))

    profile = replace(PROFILES["alchemy"], batch_cap=10)
    with ProviderStandIn(chain.node.rpc_url, profile, node_lags=(0, 1, 2, 3), missing_log_blocks=1,
                         units_per_s=PLAN_CU, catch_up_s=2.0) as provider:
        plain = local_network(provider.url, chain.node.chain_id, chain.contracts, finality_depth=4,
                              initial_block_range=20, max_block_range=200, head_margin=0,
                              history_initial_block_range=1_000).model_copy(update={"poll_interval_s": 0.2})
        # The API reaches the node itself: only the daemon's calls are the provider's to count.
        api_settings = indexer_settings(plain.model_copy(update={"rpc_url": chain.node.rpc_url}))
        settings = indexer_settings(plain)
        network = plain.model_copy(update={"provider": "alchemy", "rpc_budget_per_s": BUDGET_CU})
        settings = settings.model_copy(update={
            "providers": load_settings().providers, "networks": {"local": network},
            "rpc": settings.rpc.model_copy(update={"max_batch_size": 10})})
        doubted_before = doubts()
        started = time.monotonic()
        async with running_indexer(settings, database_url):
            stop = threading.Event()
            mining = asyncio.create_task(asyncio.to_thread(keep_mining, chain, stop, actors, newcomers[:40]))
            env = {**os.environ, "DATABASE_URL": database_url, "VIP_CONFIG": str(overlay)}
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "vip.cli", "watch", "local", "--file", str(path), env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            async with checked_api(aiohttp_client, api_settings, database_url, engine) as api:
                for signer in signers:
                    await connect(api, await api.user(), signer)
            out, err = await cli.communicate()
            assert cli.returncode == 0, err.decode()
            assert out.decode().strip() == (f"watching {WALLETS - 2:,} new addresses on local "
                                            "(0 already watched)")
            await asyncio.sleep(3)  # more blocks after the set grew
            stop.set()
            assert await mining > 0
            indexed = await wait_indexed(engine, chain, "local", 0, timeout_s=900)
            # Every new wallet's balances, summed from its stored history (it starts at block 0).
            await wait_balances(engine, 2 * WALLETS, timeout_s=900)
            elapsed = time.monotonic() - started

    assert indexed == chain.head()[0]
    rows = await db_rows(engine, "local")
    truth = chain.token_logs(watched, to_block=indexed)
    assert rows == truth
    assert any(r.party_b in set(newcomers) for r in rows), "new wallets received transfers"
    assert {r.party_a for r in rows} & {s.address.lower() for s in signers}, "signed-in wallets' history"
    # The provider's habits met the daemon: lagging nodes answered, doubts were resolved, and no batch
    # passed its cap; the daemon spent no more than its budget (one second of burst at most).
    assert provider.lagged_requests > 0 and doubts() > doubted_before
    assert provider.refusals["batch_too_large"] == 0, dict(provider.refusals)
    assert provider.units <= BUDGET_CU * elapsed + BUDGET_CU, (provider.units, elapsed)
    # New wallets' first balances were summed from their history: the only eth_calls read the few wallets
    # a transfer touched afterwards (one a token each), not 400,000 up front.
    assert provider.calls["eth_call"] < 1_000, provider.calls

