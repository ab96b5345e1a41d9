"""Streaming like a real server: paced chunks, and an abrupt drop on request."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

from toolrelay.simulator.config import SimulatorConfig


class DropConnection(Exception):
    """Raised mid-stream to make the server cut the connection (--fail-after-chunks).

    ASGI has no "abort" message; a server closes the transport when the app
    raises after the response started, which is what a crashed backend does.
    """


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        # Older Starlettes deliver it wrapped in an exception group.
        inner = getattr(exc, "exceptions", None) or (exc,)
        return not all(isinstance(item, DropConnection) for item in inner)


def silence_drop_tracebacks() -> None:
    """Keep uvicorn from logging a traceback for every deliberate drop."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in logger.filters):
        logger.addFilter(_QuietDrops())


def pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


async def paced(frames: Iterable[bytes], config: SimulatorConfig) -> AsyncIterator[bytes]:
    delay = config.delay_ms / 1000
    for sent, frame in enumerate(frames):
        if sent == config.fail_after_chunks:
            raise DropConnection
        if sent and delay:
            await asyncio.sleep(delay)
        yield frame
