"""`vip listen [--forward-to URL]`: the organisation's events live in the terminal, each forwarded to a
local server signed exactly as a webhook delivery is.

It reads `GET /v1/events/stream` (Server-Sent Events) with an API key, like a lender's developer who has
a key and no database: the stream's first message carries a signing secret for this session, printed
("Ready! ..."), and every forwarded request carries the delivery headers (`Service-Signature` with that
secret, `Service-Event-Id`, `Service-Timestamp`) over the event's exact delivery body
(vip.webhooks.sender.delivery_headers, as the worker sends them)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
import orjson

from vip.cli.api_access import ApiAccess, api_access
from vip.config import Settings
from vip.webhooks.catalogue import EVENT_TYPES
from vip.webhooks.sender import USER_AGENT, delivery_headers

FORWARD_TIMEOUT_S = 10.0  # a delivery's own time-out (webhooks.timeout_s)


@dataclass(frozen=True)
class Message:
    """One Server-Sent Events message."""

    event: str
    data: bytes
    id: str | None


async def sse_messages(chunks: AsyncIterator[bytes]) -> AsyncIterator[Message]:
    """Messages of a Server-Sent Events body (comments skipped), however the bytes are chunked."""
    buffer = b""
    event, data, event_id = "message", [], None
    async for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            line = line.rstrip(b"\r")
            if not line:
                if data:
                    yield Message(event, b"\n".join(data), event_id)
                event, data, event_id = "message", [], None
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if name == b"event":
                event = value.decode()
            elif name == b"data":
                data.append(value)
            elif name == b"id":
                event_id = value.decode()


def summary(event: dict) -> str:
    """One line: time, type, event id, the object's id."""
    obj = event.get("data", {}).get("object", {})
    object_id = obj.get("id") or obj.get("vip_id") or obj.get("tx_hash") or "-"
    test = "  (test)" if event.get("data", {}).get("test") else ""
    return f"{event['created_at']}  {event['type']:<34} {event['id']}  {object_id}{test}"


async def forward(session: aiohttp.ClientSession, url: str, secret: str, event_id: str, body: bytes) -> str:
    """POST the event to the local server as a delivery; what happened, for the terminal."""
    headers = delivery_headers(event_id, body, [secret], datetime.now(UTC))
    try:
        async with session.post(url, data=body, headers=headers, allow_redirects=False,
                                timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)) as resp:
            return f"  <-- [{resp.status}] POST {url}"
    except TimeoutError:
        return f"  <-- no answer within {FORWARD_TIMEOUT_S:g} s from {url}"
    except (aiohttp.ClientError, OSError) as exc:
        return f"  <-- POST {url} failed: {type(exc).__name__}: {exc}"


def say(text: str) -> None:
    print(text, flush=True)


async def listen(access: ApiAccess, forward_to: str | None, types: set[str] | None, as_json: bool) -> int:
    # No total time-out: the stream is open until ^C; the connection itself must come up quickly.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    async with aiohttp.ClientSession(timeout=timeout, headers={"User-Agent": USER_AGENT},
                                     trust_env=False) as session:
        try:
            async with session.get(f"{access.base_url}/v1/events/stream", headers={
                    "Authorization": f"Bearer {access.api_key}", "Accept": "text/event-stream"}) as resp:
                if resp.status != 200:
                    is_json = resp.content_type == "application/json"
                    error = orjson.loads(await resp.read()).get("error", {}) if is_json else {}
                    print(f"vip listen: the API answered {resp.status} {error.get('code', '')}: "
                          f"{error.get('message', '')}", file=sys.stderr)
                    return 1
                secret = ""
                async for message in sse_messages(resp.content.iter_any()):
                    if message.event == "ready":
                        secret = orjson.loads(message.data)["secret"]
                        say(f"Ready! Your webhook signing secret is {secret} (^C to quit)")
                        if forward_to:
                            say(f"Forwarding events to {forward_to}")
                        continue
                    if message.event == "error":
                        error = orjson.loads(message.data)
                        print(f"vip listen: the API ended the stream: {error.get('code', '')}: "
                              f"{error.get('message', '')}", file=sys.stderr)
                        return 1
                    if message.event != "event":
                        continue
                    event = orjson.loads(message.data)
                    if types is not None and event["type"] not in types:
                        continue
                    say(message.data.decode() if as_json else summary(event))
                    if forward_to:
                        say(await forward(session, forward_to, secret, event["id"], message.data))
        except (aiohttp.ClientError, OSError) as exc:
            print(f"vip listen: cannot reach the API at {access.base_url} ({exc}); is `vip dev` running?",
                  file=sys.stderr)
            return 1
    print("vip listen: the API closed the stream", file=sys.stderr)
    return 1


def run_listen(settings: Settings, args: argparse.Namespace) -> int:
    if args.forward_to and not args.forward_to.startswith(("http://", "https://")):
        print(f"vip listen: --forward-to takes an http:// or https:// URL, not {args.forward_to!r}",
              file=sys.stderr)
        return 2
    types = None
    if args.events:
        types = {t.strip() for t in args.events.split(",") if t.strip()}
        unknown = sorted(types - set(EVENT_TYPES))
        if unknown:
            print(f"vip listen: unknown event types {', '.join(unknown)}; one of: {', '.join(EVENT_TYPES)}",
                  file=sys.stderr)
            return 2
    access = api_access(settings, args)
    if isinstance(access, str):
        print(f"vip listen: {access}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(listen(access, args.forward_to, types, args.json))
    except KeyboardInterrupt:
        return 0
