"""structlog configuration: one stream (JSON or console) for our logs and the libraries'.

Standard-library loggers (aiohttp, kubernetes-asyncio, urllib3) go through the same
processors via ``ProcessorFormatter``. Exception tracebacks never include frame locals, so a
token held in a local variable cannot reach the log.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog
from structlog.tracebacks import ExceptionDictTransformer

from autoscaler.terminal import colour_wanted

LogFormat = Literal["json", "console"]


def configure_logging(*, log_format: LogFormat = "json", level: str = "info") -> None:
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if log_format == "json":
        shared.append(
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
        )
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=colour_wanted(sys.stderr))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer,
        ])
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # Chatty libraries log every request at INFO; their warnings still come through.
    for noisy in ("aiohttp.access", "urllib3.connectionpool", "kubernetes_asyncio"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


def debug_traceback(error: BaseException) -> BaseException | None:
    """``exc_info`` for a log line: the traceback only when the user asked for debug logs;
    otherwise the line's message names the error and nothing more."""
    return error if logging.getLogger().isEnabledFor(logging.DEBUG) else None
