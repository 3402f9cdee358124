"""structlog configured once: console in development, JSON in production; context via contextvars.

Libraries that log through the standard library (aiohttp, asyncio, SQLAlchemy, Alembic, web3) are rendered
by the same renderer, so an operator's log pipeline reads one format."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(fmt: str = "console", level: int = logging.INFO) -> None:
    renderer = (structlog.processors.JSONRenderer() if fmt == "json"
                else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    stamped = [structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *stamped,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.contextvars.merge_contextvars, structlog.stdlib.add_logger_name,
                           *stamped, structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)  # libraries' info lines are noise; their warnings and errors are not
