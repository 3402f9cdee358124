"""The lanes are enforced (tests/support/lanes.py): a test that reaches a chain or starts a process without
its mark fails, so the fast lane stays fast without anyone remembering to mark."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("pytester",)
REPOSITORY = Path(__file__).resolve().parent.parent

INNER_TESTS = '''
import subprocess
import sys

import pytest


@pytest.fixture
def session_chain():
    return "a chain"


def test_pure():
    assert 1 + 1 == 2


def test_reaches_a_chain_at_run_time(request):
    assert request.getfixturevalue("session_chain") == "a chain"


@pytest.mark.chain
def test_marked_chain(request):
    assert request.getfixturevalue("session_chain") == "a chain"


def test_asks_for_a_chain(session_chain):
    assert session_chain == "a chain"


def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.e2e
def test_marked_e2e():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''


@pytest.mark.e2e
def test_an_unmarked_chain_or_process_fails_and_the_fast_lane_deselects_the_marked(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    pytester.makepyfile(test_inner=INNER_TESTS)
    monkeypatch.setenv("PYTHONPATH", str(REPOSITORY))  # the inner run loads the lanes plugin of this checkout
    plugins = ("-p", "no:cacheprovider", "-p", "no:vip", "-p", "tests.support.lanes")

    everything = pytester.runpytest_subprocess(*plugins)
    # The process is found once the test is over: its teardown report is the error.
    everything.assert_outcomes(passed=5, failed=1, errors=1)
    failed = "\n".join(everything.outlines)
    assert "test_reaches_a_chain_at_run_time used ['session_chain']: mark it `@pytest.mark.chain`" in failed
    assert "test_starts_a_process started ['python" in failed

    fast = pytester.runpytest_subprocess(*plugins, "-m", "not chain and not e2e and not fuzz")
    # The fixture-asking test is marked at collection and deselected; the two unmarked offenders still fail.
    fast.assert_outcomes(passed=2, failed=1, errors=1, deselected=3)
