"""The client's poller past a rate limit (`VipClient.get_within_limits`, which `wait_for_vip` and `vip dev`'s
summary use): it waits the Retry-After a 429 names and asks again, and gives the 429 back when the wait would
end past its deadline or it is stopped. The server is a loopback HTTP server answering the spec's 429 (error
body, Retry-After) as the API does past a limit: the end-to-end path needs a minute's budget spent and a
window's turn, which only a slow machine gave `vip dev` (docs/testing.md)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vip.client import VipClient


class LimitedServer(ThreadingHTTPServer):
    """Answers the first `limited` GETs with 429 and `Retry-After: retry_after`, then 200; records when each
    request came."""

    def __init__(self, limited: int, retry_after: int) -> None:
        super().__init__(("127.0.0.1", 0), LimitedHandler)
        self.limited = limited
        self.retry_after = retry_after
        self.arrivals: list[float] = []


class LimitedHandler(BaseHTTPRequestHandler):
    server: LimitedServer

    def do_GET(self) -> None:
        self.server.arrivals.append(time.monotonic())
        if len(self.server.arrivals) <= self.server.limited:
            status, body = 429, {"error": {"code": "ERR_RATE_LIMITED", "message": "Too many requests",
                                           "details": {}, "request_id": "req_test"}}
        else:
            status, body = 200, {"vip_report": {"status": "verified"}}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if status == 429:
            self.send_header("Retry-After", str(self.server.retry_after))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator:
    servers: list[LimitedServer] = []

    def start(limited: int, retry_after: int) -> tuple[LimitedServer, VipClient]:
        server = LimitedServer(limited, retry_after)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, VipClient(f"http://127.0.0.1:{server.server_address[1]}", "sk_test")

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_429_is_waited_out_for_its_retry_after_then_asked_again(serve):
    server, client = serve(limited=2, retry_after=1)
    resp = client.get_within_limits("/v1/vip-report", time.monotonic() + 60, user_id="usr_1")
    assert resp.status == 200 and resp.body["vip_report"]["status"] == "verified"
    first, second, third = server.arrivals
    # Asked again only once the Retry-After had passed: a poller that hammers stays limited.
    assert second - first >= 1 and third - second >= 1


def test_a_wait_past_the_deadline_gives_the_429_back_at_once(serve):
    server, client = serve(limited=1, retry_after=30)
    resp = client.get_within_limits("/v1/vip-report", time.monotonic() + 5, user_id="usr_1")
    assert resp.status == 429 and resp.error_code == "ERR_RATE_LIMITED"
    assert resp.headers["Retry-After"] == "30" and len(server.arrivals) == 1


def test_a_stopped_poller_gives_the_429_back_without_asking_again(serve):
    server, client = serve(limited=1, retry_after=2)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    resp = client.get_within_limits("/v1/vip-report", time.monotonic() + 60, stop.is_set, user_id="usr_1")
    assert resp.status == 429 and len(server.arrivals) == 1
