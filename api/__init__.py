"""The HTTP API (aiohttp): lenders' backends call it under /v1."""
