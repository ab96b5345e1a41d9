"""Streaming like a real server: paced chunks, an abrupt drop on request, and
a connection closed after each whole stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from starlette.responses import StreamingResponse

from toolrelay.simulator.config import SimulatorConfig


class DropConnection(Exception):
    """Raised mid-stream to make the server cut the connection (--fail-after-chunks).

    ASGI has no "abort" message; a server closes the transport when the app
    raises after the response started, which is what a crashed backend does.
    """


# Seconds between the end of a stream and the close (--close-after-stream).
_CLOSE_DELAY = 0.02


class ClosingStream(StreamingResponse):
    """A stream sent whole, then its connection closed without a ``Connection:
    close`` (--close-after-stream): llama-server's HTTP library ends every
    stream that way, so a client that reuses the pooled connection at once
    writes into a closing socket."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await super().__call__(scope, receive, send)
        # The close comes a moment after the end, once the server's thread has
        # finished with the stream: by then the client may have reused it.
        await asyncio.sleep(_CLOSE_DELAY)
        raise DropConnection  # after the end: the server closes the transport


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
