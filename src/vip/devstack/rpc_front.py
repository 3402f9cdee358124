"""A local HTTP server in front of a JSON-RPC node, on a thread and event loop of its own, so synchronous
tests and benches can start and stop it around the code they drive. Subclasses answer each request
(`_handle`): the provider stand-in (vip.devstack.provider) and the tests' fault proxy."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from typing import Self

import aiohttp
from aiohttp import web


class RpcFrontServer(ABC):
    """Serves POST on 127.0.0.1 (a free port) and forwards what `_handle` chooses to `upstream_url`."""

    thread_name = "rpc-front"
    upstream_timeout_s = 60.0

    def __init__(self, upstream_url: str) -> None:
        self.upstream_url = upstream_url
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- control (any thread) ------------------------------------------------------------------------
    def start(self) -> str:
        if self._thread is not None:
            raise RuntimeError(f"{self.thread_name} already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        try:
            port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        except BaseException:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._thread = self._loop = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- server (own loop) ---------------------------------------------------------------------------
    async def _serve(self) -> int:
        self._closing = asyncio.Event()  # set on shutdown: releases requests a fault holds
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.upstream_timeout_s))
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        return self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        self._closing.set()
        await self._runner.cleanup()
        await self._session.close()

    @abstractmethod
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one POST (forwarding to `upstream_url` as the subclass chooses)."""
