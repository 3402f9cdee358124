"""The suite's lanes (docs/testing.md).

- The fast lane, `scripts/test --fast`, is every test that needs no chain and starts no process of its
  own: the pure rules, and the application in this process on the session's PostgreSQL. It is the inner loop.
- The full suite (`scripts/test`, what CI runs) adds the `chain` tests (on the session's Anvil: indexing,
  approvals, charges), the `e2e` tests, which start processes (`vip` commands, daemons killed with SIGKILL,
  an Anvil of their own, a browser, a wheel build), and the `fuzz` sweeps of generated requests over every
  operation.

A test is `chain` (or `e2e`) when it asks for a fixture in `CHAIN_FIXTURES` (`E2E_FIXTURES`), directly or
through another fixture, or carries the mark. The lanes are enforced, not remembered: a test that is not
`e2e` and still starts a process (in its own code or in a fixture of any scope), or that is neither and
still reaches a chain fixture at run time (`request.getfixturevalue`), fails, naming what it used.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Fixtures that start processes: an Anvil node of the test's own (with the test tokens, or with the real USDC
# and USDT contracts), Chromium (two fixtures), the integrators' plugin's stack (`vip dev` in a subprocess,
# vip/testing.py). An Anvil is not caught by the process check (the session's is shared): name it here.
E2E_FIXTURES = frozenset({"chain", "real_chain", "dashboard", "browser", "vip_stack"})
# Fixtures that reach the session's Anvil (with the test tokens, or with the real USDC and USDT contracts).
CHAIN_FIXTURES = frozenset({"anvil", "w3", "session_chain", "shared_real_chain"})
# Processes the session starts once for every test (its PostgreSQL, its Anvil): not the test's own.
SHARED_PROGRAMS = ("anvil", "postgres", "pg_ctl", "initdb")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chain: uses the session's Anvil (full suite only, not --fast)")
    config.addinivalue_line("markers", "e2e: starts processes of its own (full suite only, not --fast)")
    config.addinivalue_line("markers", "fuzz: generated requests over every operation (full suite only)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if E2E_FIXTURES & names:
            item.add_marker(pytest.mark.e2e)
        if CHAIN_FIXTURES & names:
            item.add_marker(pytest.mark.chain)


def _program(args: Any) -> str:
    first = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
    return Path(str(first)).name


# The programs the running test has started (setup, call and teardown, fixtures of any scope included);
# None while no test runs or while an e2e test runs.
_started: list[str] | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    original = subprocess.Popen.__init__

    def recording(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        program = _program(args)
        if _started is not None and not program.startswith(SHARED_PROGRAMS):
            _started.append(program)
        original(self, args, *rest, **options)

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    global _started
    _started = None if item.get_closest_marker("e2e") is not None else []
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    global _started
    outcome = yield
    if call.when == "call":
        _refuse_unmarked_chain(item, outcome.get_result())
    if call.when != "teardown" or _started is None:
        return
    started, _started = sorted(set(_started)), None
    report = outcome.get_result()
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} started {started}: mark it `@pytest.mark.e2e` "
                           "(tests/support/lanes.py) so that the fast lane stays free of processes")


def _refuse_unmarked_chain(item: pytest.Item, report: pytest.TestReport) -> None:
    """A test that reached a chain fixture at run time without being marked would slow the fast lane."""
    if not report.passed or item.get_closest_marker("chain") or item.get_closest_marker("e2e"):
        return
    request = getattr(item, "_request", None)
    used = sorted(CHAIN_FIXTURES & set(getattr(request, "fixturenames", ())))
    if used:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} used {used}: mark it `@pytest.mark.chain` "
                           "(tests/support/lanes.py) so that the fast lane stays free of chains")
