"""Where the developer tools (`vip listen`, `vip trigger`) reach the API and with which key: the
command line, else $VIP_API_URL / $VIP_API_KEY, else the running `vip dev` stack (its API's address and
the demo organisation's key it saved). They use the HTTP API only, as a lender's developer would."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from vip.cli.dev_stack import DEFAULT_DATA_DIR, dev_api_key, with_dev_stack
from vip.config import ENV_API_KEY, ENV_API_URL, Settings


@dataclass(frozen=True)
class ApiAccess:
    base_url: str
    api_key: str = field(repr=False)


def add_api_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-url", help=f"the API's base URL (default: ${ENV_API_URL}, else the running "
                                          "`vip dev` stack's)")
    parser.add_argument("--api-key", help=f"an API key with the admin scope (default: ${ENV_API_KEY}, else "
                                          "the key the running `vip dev` stack saved)")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="a running `vip dev`'s data directory")


def api_access(settings: Settings, args: argparse.Namespace) -> ApiAccess | str:
    """Where to call and with which key, or one line saying what is missing."""
    data_dir = Path(args.data_dir)
    settings = with_dev_stack(settings, data_dir)
    base_url = args.api_url or settings.client.api_url or settings.api.public_base_url
    key = args.api_key or (settings.client.api_key.get_secret_value() if settings.client.api_key else None)
    key = key or dev_api_key(data_dir)
    if not key:
        return (f"no API key: pass --api-key, set ${ENV_API_KEY} (a key with the admin scope: "
                f"`vip keys create --org ORG --scopes admin`), or start `vip dev` here")
    return ApiAccess(base_url.rstrip("/"), key)
