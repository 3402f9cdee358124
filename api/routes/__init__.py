"""HTTP handlers, one module per resource group; each exposes `routes` (an aiohttp RouteTableDef)."""
