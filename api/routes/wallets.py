"""GET /v1/wallets: a user's wallets whose connection is active, with balances and first-seen block.

- `user_id` is required and must be a user of the caller's organisation (else 404).
- `network` is optional; it must be one of the spec's `ethereum`, `polygon`, `base`, `arbitrum` or a
  network named in the service's configuration (else 400).
- `usdc_balance` / `usdt_balance`: token units (exact JSON numbers) of `balanceOf` at the latest block the
  indexer has processed, as stored by `vip.indexer.balances`; 0 until the first reading (and for a token the
  network does not have).
- `first_seen_block`: the lowest block of a stored USDC or USDT transfer to or from the address on that
  network, null when none is stored yet.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from vip.api.context import ENGINE, SETTINGS, principal, requires
from vip.api.jsonio import json_response
from vip.api.validation import Query, read_query
from vip.transactions.wallets import user_wallets, wallet_json

routes = web.RouteTableDef()


class WalletsQuery(Query):
    user_id: str = Field(min_length=1, max_length=100)
    network: str | None = Field(default=None, min_length=1, max_length=100)


@routes.get("/v1/wallets")
@requires("read")
async def list_wallets(request: web.Request) -> web.Response:
    query = read_query(request, WalletsQuery)
    settings = request.app[SETTINGS]
    rows = await user_wallets(request.app[ENGINE], settings, principal(request).organisation_id,
                              query.user_id, query.network)
    return json_response({"wallets": [wallet_json(row, settings) for row in rows]})
