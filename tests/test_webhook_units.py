"""The pure webhook rules: the retry schedule, signatures, endpoint URLs, event-type subscriptions."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vip.webhooks.catalogue import EVENT_TYPES, normalise_event_types, subscribed
from vip.webhooks.schedule import MAX_ATTEMPTS, is_success, next_attempt_after_failure
from vip.webhooks.signing import new_secret, signature, signatures, verify
from vip.webhooks.store import signing_secrets
from vip.webhooks.stream import SeqWindow
from vip.webhooks.urls import check_endpoint_url

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_schedule_is_the_specs():
    assert MAX_ATTEMPTS == 5
    delays = [next_attempt_after_failure(n, T0) for n in range(1, 6)]
    assert delays == [T0 + timedelta(minutes=5), T0 + timedelta(minutes=30), T0 + timedelta(hours=2),
                      T0 + timedelta(hours=8), None]
    with pytest.raises(ValueError):
        next_attempt_after_failure(0, T0)


@pytest.mark.parametrize(("code", "ok"), [(200, True), (201, True), (204, True), (299, True), (199, False),
                                          (301, False), (304, False), (400, False), (410, False),
                                          (500, False), (None, False)])
def test_only_2xx_is_success(code, ok):
    assert is_success(code) is ok


@given(st.binary(max_size=2000), st.text(min_size=1, max_size=80))
def test_signature_matches_an_independent_hmac(body, secret):
    expected = "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    assert signature(secret, body) == expected
    assert expected[7:] == expected[7:].lower() and len(expected) == 7 + 64
    assert verify(secret, body, [expected])
    assert not verify(secret + "x", body, [expected])


def test_secrets_are_random_and_rotation_signs_with_both_during_the_overlap():
    old, new = new_secret(), new_secret()
    assert old != new and old.startswith("whsec_") and len(old) >= 48
    until = T0 + timedelta(hours=24)
    assert signing_secrets(new, old, until, T0) == [new, old]
    assert signing_secrets(new, old, until, until) == [new]
    assert signing_secrets(new, None, None, T0) == [new]
    values = signatures([new, old], b"{}")
    assert verify(old, b"{}", values) and verify(new, b"{}", values)


@pytest.mark.parametrize("url", ["https://hooks.example.com/vip", "https://hooks.example.com:8443/a?b=c",
                                 "https://93.184.215.14/x", "HTTPS://Example.com/"])
def test_good_urls(url):
    assert check_endpoint_url(url, allow_http=False) == url


@pytest.mark.parametrize(("url", "why"), [
    ("http://hooks.example.com/x", "https"),
    ("ftp://hooks.example.com/x", "https://"),
    ("https://user:pass@hooks.example.com/x", "credentials"),
    ("https://user@hooks.example.com/x", "credentials"),
    ("https://:pass@hooks.example.com/x", "credentials"),
    ("https:///path", "host"),
    ("https://hooks.example.com:0/x", "port"),
    ("https://hooks.example.com:70000/x", "valid"),
    ("https://hooks.example.com/x#frag", "fragment"),
    ("https://hooks.example.com/a b", "whitespace"),
    ("https://hooks.example.com/" + "a" * 2100, "longer"),
    ("hooks.example.com", "https://"),
])
def test_bad_urls(url, why):
    with pytest.raises(ValueError, match=why):
        check_endpoint_url(url, allow_http=False)


def test_http_only_when_allowed():
    assert check_endpoint_url("http://127.0.0.1:9000/hook", allow_http=True)
    with pytest.raises(ValueError, match="credentials"):
        check_endpoint_url("http://a:b@127.0.0.1/hook", allow_http=True)


def test_event_type_subscriptions():
    assert normalise_event_types(None) is None
    assert normalise_event_types(["*"]) is None
    assert normalise_event_types(["charge.failed", "vip.verified", "charge.failed"]) == [
        "vip.verified", "charge.failed"]
    for bad in ([], ["vip.generated"], ["*", "vip.verified"]):
        with pytest.raises(ValueError):
            normalise_event_types(bad)
    assert subscribed(None, "fraud.flagged")
    assert subscribed(["fraud.flagged"], "fraud.flagged") and not subscribed(["fraud.flagged"], "vip.failed")
    assert len(EVENT_TYPES) == len(set(EVENT_TYPES)) == 17


def test_the_event_stream_window_sends_each_event_once_even_when_it_commits_late():
    window = SeqWindow(cursor=10, lookback_s=30)
    assert window.take([9, 10, 11, 12], now=0) == [11, 12]  # from after the cursor it opened at
    assert window.take([11, 12, 14], now=1) == [14]
    # 13 took its sequence number before 14 but committed after it was sent: sent now.
    assert window.take([11, 12, 13, 14], now=2) == [13]
    assert window.take([13, 14], now=3) == []
    # A batch at most, the rest at the next look.
    assert window.take(list(range(15, 25)), now=4, limit=3) == [15, 16, 17]
    assert window.take(list(range(15, 25)), now=5, limit=3) == [18, 19, 20]
    # Past the look-back, what lies below where the cursor stood then is not looked at again.
    assert window.floor(now=36) == 20
    assert window.take([16, 21], now=36) == [21]
