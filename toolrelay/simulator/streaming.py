"""Streaming like a real server: paced chunks, and an abrupt drop on request."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from toolrelay.simulator.config import SimulatorConfig


class DropConnection(Exception):
    """Raised mid-stream to make the server cut the connection (--fail-after-chunks).

    ASGI has no "abort" message; a server closes the transport when the app
    raises after the response started, which is what a crashed backend does.
    """


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], DropConnection))


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


class Stream(StreamingResponse):
    """A streaming response that neither buffers nor hides the app's exceptions.

    Starlette's own runs the body in a task group that wraps a mid-stream
    exception; here it reaches the server as is, so a drop stays a drop.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async for frame in self.body_iterator:
            body = frame.encode() if isinstance(frame, str) else bytes(frame)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
