"""``POST /v1/chat/completions``, as a plain ASGI app: the hot path.

It skips Starlette's Request/Response objects and pydantic alike; the body is
read once, checked by :mod:`toolrelay.server.request`, and the round run by
:mod:`toolrelay.io.backends.rounds`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from toolrelay.io.backends import BackendError, Finish, Opened, StreamItem
from toolrelay.io.backends.rounds import complete_round, stream_round
from toolrelay.rescue import RescueRequestError
from toolrelay.server import loops
from toolrelay.server.errors import APIError, invalid, upstream
from toolrelay.server.gateway import Gateway
from toolrelay.server.request import ChatRequest, decode, read_request
from toolrelay.server.wire import DONE, KEEPALIVE, ChunkEncoder, completion, sse_error

log = logging.getLogger("toolrelay.server")

_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class ChatCompletions:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        counters = self.gateway.counters
        try:
            raw = await _read_body(receive, self.gateway.settings.max_body_bytes)
            settings = self.gateway.settings
            chat = read_request(
                decode(raw),
                settings,
                _header(scope, b"x-toolrelay-stuck-mode"),
                _header(scope, b"authorization"),
            )
            extra: dict[str, Any] = {}
            verdict = loops.check(chat.round, chat.stuck_mode, settings, counters)
            if verdict is not None:
                chat.round = loops.final_answer_request(chat.round, verdict)
                extra["toolrelay_stuck"] = verdict.to_public_dict()
            outcome = "ok"
            if chat.stream:
                outcome = await self._stream(chat, extra, send, receive)
            else:
                reply = await complete_round(
                    self.gateway.backends.for_model(chat.round.model), chat.round, counters
                )
                if reply.warning:
                    extra["toolrelay_warning"] = reply.warning
                await send_json(send, 200, completion(reply, chat.round.model, extra))
            counters.inc("requests", outcome)
        except APIError as exc:
            counters.inc("requests", "invalid" if exc.status < 500 else "error")
            await send_json(send, exc.status, exc.to_dict())
        except RescueRequestError as exc:
            # Found only when the history is rewritten for a rescued model.
            counters.inc("requests", "invalid")
            await send_json(send, 400, invalid(str(exc), exc.param).to_dict())
        except BackendError as exc:
            counters.inc("requests", "backend_error")
            counters.inc("backend_errors", str(exc.status))
            error = upstream(exc.status, exc.message)
            await send_json(send, error.status, error.to_dict())
        except Exception:
            # A bug of ours, not the client's: still an OpenAI error object.
            log.exception("chat completion failed")
            counters.inc("requests", "error")
            error = APIError(500, "toolrelay failed to handle the request", type="server_error")
            await send_json(send, 500, error.to_dict())

    async def _stream(
        self, chat: ChatRequest, extra: dict[str, Any], send: Send, receive: Receive
    ) -> str:
        """Stream the round; the outcome for the request counter."""
        backend = self.gateway.backends.for_model(chat.round.model)
        items = stream_round(
            backend,
            chat.round,
            self.gateway.counters,
            patience=self.gateway.settings.keepalive_interval or None,
        )
        # Errors up to Opened are answered with a status; later ones in the stream.
        await items.__anext__()  # [Opened()]
        encoder = ChunkEncoder(chat.round.model, chat.include_usage)
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        writer = _StreamWriter(send, self.gateway.settings.keepalive_interval)
        relay = asyncio.create_task(self._relay_stream(items, encoder, writer, extra))
        watcher = asyncio.create_task(_watch_disconnect(receive, writer))
        try:
            await asyncio.wait({relay, watcher}, return_when=asyncio.FIRST_COMPLETED)
            outcome = relay.result() if relay.done() else "client_gone"
        finally:
            writer.stop()
            watcher.cancel()
            if not relay.done():
                # The client left while the relay waits for the backend, which
                # may stay silent for long: cancelling the relay closes the
                # backend's connection now, which stops the generation there.
                relay.cancel()
                await asyncio.wait({relay})
            await items.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return outcome

    async def _relay_stream(
        self,
        items: AsyncIterator[list[StreamItem]],
        encoder: ChunkEncoder,
        writer: _StreamWriter,
        extra: dict[str, Any],
    ) -> str:
        """Relay the stream, errors included; the outcome for the request counter."""
        try:
            await writer.write(encoder.role())
            await _relay(items, encoder, writer, extra)
        except BackendError as exc:
            self.gateway.counters.inc("backend_errors", str(exc.status))
            await writer.write(sse_error(upstream(exc.status, exc.message).to_dict()))
            return "backend_error"
        except RescueRequestError as exc:
            await writer.write(sse_error(invalid(str(exc), exc.param).to_dict()))
            return "invalid"
        except Exception:
            log.exception("stream failed after it started")
            error = APIError(500, "toolrelay failed while streaming", type="server_error")
            await writer.write(sse_error(error.to_dict()))
            return "error"
        return "client_gone" if writer.disconnected else "ok"


async def _relay(
    batches: AsyncIterator[list[StreamItem]],
    encoder: ChunkEncoder,
    writer: _StreamWriter,
    extra: dict[str, Any],
) -> None:
    async for batch in batches:
        if writer.disconnected:
            return
        out = []
        for item in batch:
            if isinstance(item, Finish):
                if item.warning:
                    extra["toolrelay_warning"] = item.warning
                out.append(encoder.finish(item.reason, extra))
                if encoder.include_usage:
                    out.append(encoder.usage(item.usage))
                out.append(DONE)
            elif not isinstance(item, Opened):
                data = encoder.event(item)
                if data is not None:
                    out.append(data)
        if out:
            await writer.write(b"".join(out))


class _StreamWriter:
    """Sends SSE bytes, and a comment line whenever nothing was sent for a while."""

    def __init__(self, send: Send, interval: float) -> None:
        self._send = send
        self._last = time.monotonic()
        self.disconnected = False
        self._keepalive = asyncio.create_task(self._beat(interval)) if interval > 0 else None

    async def write(self, data: bytes) -> None:
        # No lock against the keep-alive task: each send is one whole SSE
        # message, so a comment can only ever land between two events.
        self._last = time.monotonic()
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def _beat(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval - (time.monotonic() - self._last))
            if time.monotonic() - self._last >= interval:
                await self.write(KEEPALIVE)

    def stop(self) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()


async def _watch_disconnect(receive: Receive, writer: _StreamWriter) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            writer.disconnected = True
            writer.stop()
            return


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise APIError(400, "The client went away before sending the body.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise APIError(413, f"The request body exceeds {limit} bytes.", code="body_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def send_json(send: Send, status: int, body: Any) -> None:
    data = orjson.dumps(body)
    headers = [*_JSON_HEADERS, (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
