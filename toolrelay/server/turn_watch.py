"""A ``/ws`` turn as the inspector records it and the traces show it.

An HTTP request is recorded and traced around its endpoint (``Inspector.wrap``,
``Traced``); a ``/ws`` connection lasts many turns, so each turn is a record
of its own (method ``WS``): what the user sent, every backend attempt of its
rounds, every event the client got, and how it ended.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolrelay.server.inspector import Inspector

# The status of a turn whose client left before its end (as nginx's 499).
CLIENT_GONE = 499


class TurnWatch:
    """One turn's record (None when the inspector is off) and its figures."""

    def __init__(self, inspector: Inspector | None, text: str) -> None:
        self.inspector = inspector
        self.record = inspector.start("WS", "/ws") if inspector is not None else None
        if self.record is not None:
            self.record.client_sent = self.record.budget.keep({"type": "user_text", "text": text})
        self.status = 200
        self.calls = 0

    def sent(self, event: dict[str, Any]) -> None:
        """An event the client was sent."""
        if event["type"] == "tool_call":
            self.calls += 1
        if self.record is not None:
            self.record.sent(orjson.dumps(event).decode() + "\n")

    def end(self, span: Any, model: str | None) -> None:
        """The turn is over: the record finished and listed, the span given its figures."""
        if self.record is not None and self.inspector is not None:
            self.record.answer_out(self.calls, None)
            self.inspector.end(self.record, self.status, {"model": model})
        if span is not None:
            if model:
                span.set_attribute("gen_ai.request.model", model)
            span.set_attribute("toolrelay.tool_calls", self.calls)
            span.set_attribute("toolrelay.status", self.status)
            if self.status >= 500:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR))
