"""The inspector's memory: the last N requests' records, and who watches them.

:meth:`Inspector.wrap` puts an endpoint under watch: each request gets a
:class:`~toolrelay.io.recording.RequestRecord` (the round fills in its
attempts), what the client sent and got is kept within the record's size
cap, credentials redacted, and each record is announced to the live list
when it starts and when it ends. Only the newest ``size`` records are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.io.recording import RequestRecord
from toolrelay.server.logs import NOTES

# Updates a slow watcher may fall behind by before it misses some.
_BACKLOG = 256


class Inspector:
    def __init__(self, size: int, entry_bytes: int, redact: Callable[[str], str]) -> None:
        self.size = size
        self.entry_bytes = entry_bytes
        self.redact = redact
        self.records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._watchers: set[asyncio.Queue[dict[str, Any] | None]] = set()

    def recent(self) -> list[RequestRecord]:
        """Newest first."""
        return list(reversed(self.records.values()))

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """``app`` with every request recorded."""
        return _Recorded(self, app)

    def start(self, method: str, path: str, record_id: str | None = None) -> RequestRecord:
        """A new record, listed (and announced) at once; :meth:`end` it."""
        record = RequestRecord(
            record_id or "req_" + uuid.uuid4().hex, method, path, self.entry_bytes, self.redact
        )
        self._add(record)
        return record

    def end(self, record: RequestRecord, status: int, notes: dict[str, Any]) -> None:
        record.finish(status, notes)
        self._announce(record)

    async def record(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Run ``app`` for one request, recorded."""
        notes = scope.setdefault(NOTES, {})
        record = self.start(scope["method"], scope["path"], notes.get("request_id"))
        received = bytearray()
        status = 0

        async def receive_and_keep() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                # One byte over the cap is enough to know it is over.
                room = self.entry_bytes + 1 - len(received)
                received.extend(message.get("body", b"")[: max(room, 0)])
                if not message.get("more_body", False):
                    record.client_sent = record.budget.keep(_decoded(bytes(received)))
            return message

        async def send_and_keep(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and message.get("body"):
                text = message["body"].decode("utf-8", "replace")
                record.sent(text)
            await send(message)

        token = record.enter()
        try:
            await app(scope, receive_and_keep, send_and_keep)
        finally:
            RequestRecord.leave(token)
            self.end(record, status, dict(notes))

    def _add(self, record: RequestRecord) -> None:
        self.records[record.id] = record
        while len(self.records) > self.size:
            self.records.popitem(last=False)
        self._announce(record)

    def _announce(self, record: RequestRecord) -> None:
        summary = record.summary()
        for queue in self._watchers:
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(summary)

    def watch(self) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of every record's summary as it starts and ends; None: the end."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(_BACKLOG)
        self._watchers.add(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._watchers.discard(queue)

    def close(self) -> None:
        """End every live list (the gateway stops)."""
        for queue in self._watchers:
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)


class _Recorded:
    """An ASGI app recorded (a class: Starlette routes call plain functions with a Request)."""

    def __init__(self, inspector: Inspector, app: ASGIApp) -> None:
        self.inspector = inspector
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.inspector.record(self.app, scope, receive, send)


def _decoded(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")
