"""`vip trigger EVENT_TYPE`: fire a test event for the caller's organisation through the API
(`POST /v1/events/trigger`): the type's sample object with `data.test: true`, delivered to the
organisation's endpoints and to `vip listen`."""

from __future__ import annotations

import argparse
import sys

from vip.cli.api_access import api_access
from vip.client import VipClient
from vip.config import Settings
from vip.webhooks.catalogue import EVENT_TYPES


def run_trigger(settings: Settings, args: argparse.Namespace) -> int:
    if args.event_type not in EVENT_TYPES:
        print(f"vip trigger: unknown event type {args.event_type!r}; one of: {', '.join(EVENT_TYPES)}",
              file=sys.stderr)
        return 2
    access = api_access(settings, args)
    if isinstance(access, str):
        print(f"vip trigger: {access}", file=sys.stderr)
        return 2
    try:
        answer = VipClient(access.base_url, access.api_key).post("/v1/events/trigger",
                                                                 {"type": args.event_type})
    except OSError as exc:
        print(f"vip trigger: cannot reach the API at {access.base_url} ({exc}); is `vip dev` running?",
              file=sys.stderr)
        return 1
    if answer.status != 201:
        error = answer.body.get("error", {}) if isinstance(answer.body, dict) else {}
        print(f"vip trigger: the API answered {answer.status} {error.get('code', '')}: "
              f"{error.get('message', answer.body)}", file=sys.stderr)
        return 1
    event = answer.body["event"]
    print(f"triggered {event['type']} {event['id']} (a test event: data.test is true)")
    return 0
