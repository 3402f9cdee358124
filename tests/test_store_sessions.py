"""How the service's database sessions are set up, whatever the server's defaults."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


async def test_the_service_sessions_run_without_jit_compilation(engine: AsyncEngine):
    """Decision 357: a short read whose estimate passes jit_above_cost must not pay for compiling; every new
    connection of the service's engines turns JIT off (the server's default is on)."""
    async with engine.connect() as conn:
        assert await conn.scalar(text("SHOW jit")) == "off"
    async with engine.begin() as conn:
        assert await conn.scalar(text("SHOW jit")) == "off"
