"""The borrowers pages (a placeholder: the route table is filled on its own branch)."""

from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()
