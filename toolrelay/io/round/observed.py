"""One backend attempt as the inspector and the traces see it.

:func:`observe` is None unless the inspector records this request or traces
are on: the round then pays one check per attempt and makes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolrelay.events import CallRejected, Event, ToolCallEnd
from toolrelay.io import spans
from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.recording import CURRENT_RECORD, RequestRecord, attempt_why
from toolrelay.io.round.body import parse_format
from toolrelay.io.round.request import Reply, RoundRequest, reply_events


class ObservedAttempt:
    def __init__(
        self,
        record: RequestRecord | None,
        backend: Backend,
        req: RoundRequest,
        mode: RoundMode,
        body: dict[str, Any],
        stream: bool,
    ) -> None:
        why = attempt_why()
        self.record = record
        self.entry = (
            record.attempt(backend.name, mode, body, stream=stream, why=why) if record else None
        )
        kind = backend.known_kind or backend.config.kind
        text_format = parse_format(req, mode)
        self.span = spans.start_attempt(
            backend.name, kind, req.model, mode, stream, why, text_format
        )
        self.calls: list[str] = []
        self.formats: list[str] = []  # the text formats the calls were written in
        self.rejected = 0

    def failed(self, message: str) -> None:
        if self.record is not None and self.entry is not None:
            self.record.failed(self.entry, message)
        spans.end_attempt(self.span, error=message)

    def answered(self, answer: dict[str, Any], reply: Reply) -> None:
        """A finished answer and what was read from it."""
        self.parsed(reply_events(reply), reply.raw, formats=reply.formats)
        if self.record is not None and self.entry is not None:
            self.record.answered(self.entry, answer)
        self._end(reply.usage, reply.finish_reason)

    def chunk(self, chunk: dict[str, Any]) -> None:
        if self.record is not None and self.entry is not None:
            self.record.chunk(self.entry, chunk)

    def parsed(
        self, events: Iterable[Event], raw: str | None = None, *, formats: dict[str, str]
    ) -> None:
        """What was read; ``formats``: a text call's id -> the format it was written in."""
        events = list(events)
        for event in events:
            if isinstance(event, ToolCallEnd):
                self.calls.append(event.call.name)
                written = formats.get(event.call.id)
                if written and written not in self.formats:
                    self.formats.append(written)
            elif isinstance(event, CallRejected):
                self.rejected += 1
        if self.record is not None and self.entry is not None:
            self.record.parsed(self.entry, events, raw, formats)

    def streamed(self, raw: str, usage: dict[str, Any] | None, finish: Any) -> None:
        """The end of a streamed attempt."""
        if self.record is not None and self.entry is not None:
            self.record.parsed(self.entry, (), raw, {})
            self.record.streamed(self.entry)
        self._end(usage, finish if isinstance(finish, str) else None)

    def _end(self, usage: dict[str, Any] | None, finish: str | None) -> None:
        spans.end_attempt(
            self.span,
            usage=usage,
            finish_reason=finish,
            calls=self.calls,
            formats=self.formats,
            rejected=self.rejected,
        )


def observe(
    backend: Backend, req: RoundRequest, mode: RoundMode, body: dict[str, Any], *, stream: bool
) -> ObservedAttempt | None:
    record = CURRENT_RECORD.get()
    if record is None and spans.active_tracer is None:
        return None
    return ObservedAttempt(record, backend, req, mode, body, stream)
