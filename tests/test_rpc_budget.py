"""A network's RPC budget (vip.chain.budget): the bucket's arithmetic with plain numbers, the order in
which callers of each priority are served, batches split to the provider's cap and the budget, and the
bands of a provider's units the configuration carries."""

from __future__ import annotations

import asyncio
import re

import pytest

from vip.chain.budget import Bucket, Priority, RpcBudget, budget_for
from vip.chain.rpc import RpcClient
from vip.config import RpcConfig, load_settings


def bucket(**kw) -> Bucket:
    return Bucket(**{"rate": 100.0, "capacity": 100.0, "reserve": 0.5, **kw})


def test_a_full_bucket_lets_each_priority_spend_down_to_its_floor():
    b = bucket()
    assert [b.floor(p) for p in Priority] == [0, 25, 50]
    assert [b.limit(p) for p in Priority] == [100, 75, 50]
    assert b.wait(50, Priority.BACKGROUND, now=0) == 0
    b.take(50)
    # The background may not go below the reserve; the jobs may go to half of it; the follower to zero.
    assert b.wait(1, Priority.BACKGROUND, now=0) == pytest.approx(0.01)
    assert b.wait(25, Priority.JOBS, now=0) == 0
    assert b.wait(50, Priority.FOLLOW, now=0) == 0


def test_the_bucket_refills_at_its_rate_up_to_its_capacity():
    b = bucket(level=0.0)
    assert b.wait(30, Priority.FOLLOW, now=0.0) == pytest.approx(0.3)
    assert b.wait(30, Priority.FOLLOW, now=0.3) == 0
    b.refill(now=100.0)
    assert b.level == 100


def test_a_request_over_its_priority_limit_waits_for_the_limit_and_goes_into_debt():
    b = bucket()
    assert b.wait(180, Priority.FOLLOW, now=0) == 0  # it needs the whole bucket, which it has
    b.take(180)
    assert b.level == -80
    assert b.wait(10, Priority.FOLLOW, now=0) == pytest.approx(0.9)


def test_a_429_empties_the_bucket_and_halves_the_rate_which_creeps_back():
    b = bucket()
    b.throttled(now=10.0, min_rate=20)
    assert b.level == 0 and b.rate == 50
    assert b.wait(10, Priority.FOLLOW, now=10.0) == pytest.approx(0.2)  # refilling at half the rate
    b.throttled(now=10.0, min_rate=20)
    b.throttled(now=10.0, min_rate=20)
    assert b.rate == 20  # never under the floor
    for _ in range(200):
        b.succeeded()
    assert b.rate == 100


async def test_the_follower_is_served_before_waiting_background_work():
    """An empty budget, background requests queued first: the follower's request, queued after them,
    goes first; jobs before background; each class in its order of arrival."""
    budget = RpcBudget("t", 1000, {}, 1.0, reserve=0.5)
    budget.bucket.level = 0.0
    served: list[str] = []

    async def ask(name: str, priority: Priority) -> None:
        await budget.acquire(100, priority)
        served.append(name)

    tasks = [asyncio.create_task(ask(f"background-{i}", Priority.BACKGROUND)) for i in range(3)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(ask("jobs", Priority.JOBS)))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(ask("follow", Priority.FOLLOW)))
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert served == ["follow", "jobs", "background-0", "background-1", "background-2"]
    assert budget.spent == {Priority.FOLLOW: 100, Priority.JOBS: 100, Priority.BACKGROUND: 300}


async def test_a_cancelled_wait_leaves_the_queue():
    budget = RpcBudget("t", 10, {}, 1.0)
    budget.bucket.level = 0.0
    waiting = asyncio.create_task(budget.acquire(5, Priority.BACKGROUND))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.wait_for(budget.acquire(1, Priority.FOLLOW), 30)
    assert budget.spent[Priority.BACKGROUND] == 0


def test_batches_split_to_the_cap_and_to_a_requests_share_of_the_budget():
    budget = RpcBudget("t", 100, {"eth_getLogs": 60, "eth_getBlockByNumber": 20}, 20.0, reserve=0.5)
    rpc = RpcClient("t", "http://127.0.0.1:9", RpcConfig(max_batch_size=4), budget)
    headers = [("eth_getBlockByNumber", [hex(n), False]) for n in range(9)]
    assert [len(c) for c in rpc.split(headers)] == [4, 4, 1]  # the follower: the cap, 80 units a request
    background = rpc.at(Priority.BACKGROUND)
    assert background.batch_limits() == (4, 50)
    assert [len(c) for c in background.split(headers)] == [2, 2, 2, 2, 1]  # 40 units of its 50
    assert [len(c) for c in background.split([("eth_getLogs", [{}])] * 2)] == [1, 1]  # each over, alone
    assert background.budget is rpc.budget  # one budget per network, whoever draws


def test_shipped_providers_weigh_methods_in_their_units():
    settings = load_settings()
    alchemy, infura, quicknode = (settings.providers[n] for n in ("alchemy", "infura", "quicknode"))
    assert (alchemy.weights["eth_getLogs"], alchemy.weights["eth_getBlockByNumber"],
            alchemy.weights["eth_call"]) == (60, 20, 26)
    assert infura.weights["eth_getLogs"] == 255 and infura.default_weight == 80
    assert quicknode.default_weight == 20 and not quicknode.weights
    network = settings.networks["base"].model_copy(update={"provider": "infura", "rpc_budget_per_s": 500})
    budget = budget_for(network, settings)
    assert (budget.units_per_s, budget.unit, budget.cost(["eth_getLogs", "eth_getBlockByNumber"])) == (
        500, "credits", 335)
    assert budget_for(settings.networks["base"], settings).units_per_s == settings.rpc.max_requests_per_s


def test_a_network_naming_an_unknown_provider_is_refused(tmp_path):
    overlay = tmp_path / "x.toml"
    overlay.write_text('[networks.base]\nprovider = "nodeco"\n')
    with pytest.raises(ValueError, match=re.escape("networks.base.provider: 'nodeco' is not one of")):
        load_settings(extra_files=[overlay])
