"""What one request did, for the inspector (``serve --inspector``): every
attempt sent to a backend, its raw answer or stream, and what was parsed.

The round reports to ``CURRENT_RECORD``'s value: the record of the request in
progress, or None. The server sets it (a context variable, which the compiled
round reads itself: a C call, where a function around it would be a Python
frame) only while the inspector is on, so with it off the round pays one
context-variable read per backend attempt and makes no record object. A record
keeps at most ``budget`` bytes of bodies, chunks and text (measured as JSON);
past that, a piece is replaced by a note of its size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCallEnd,
)

# The reason a correction re-ask gives (counted as a repair in the list).
CORRECTION = "correction re-ask"

# The record of the request being handled, when the inspector is on.
CURRENT_RECORD: ContextVar[RequestRecord | None] = ContextVar("toolrelay_recording", default=None)


# Why the next attempt of this request is made; set by the round before a
# re-ask or a fallback, read (and moved on) by the attempt.
_WHY: ContextVar[str] = ContextVar("toolrelay_attempt_why", default="first")


def next_attempt_because(why: str) -> None:
    """Say why the round's next attempt is made (a re-ask, a fallback)."""
    _WHY.set(why)


def attempt_why() -> str:
    """Why this attempt is made: "first", a reason given, or "next round"."""
    why = _WHY.get()
    _WHY.set("next round")
    return why


Redact = Callable[[str], str]


class Budget:
    """The bytes a record may still keep, and the one way anything is kept:
    measured as JSON, credentials taken out (``redact``) before it is kept."""

    def __init__(self, limit: int, redact: Redact) -> None:
        self.left = limit
        self.cut = 0  # pieces left out for size
        self.redact = redact

    def keep(self, value: Any) -> Any:
        """``value`` redacted when it fits (counted against the budget), else a
        note of its size."""
        if isinstance(value, str):
            if not self.fits(len(value)):
                return self.note(len(value))
            return self.redact(value)
        text = orjson.dumps(value, default=str).decode()
        if not self.fits(len(text)):
            return self.note(len(text))
        # Checked on the whole text at once; cleaned string by string, so that
        # what is kept stays the same structure.
        return value if self.redact(text) == text else _redacted(value, self.redact)

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes fit; if they do, they are counted."""
        if size > self.left:
            return False
        self.left -= size
        return True

    def note(self, size: int) -> dict[str, str]:
        """What stands in for a piece over the cap."""
        self.cut += 1
        return {"toolrelay_truncated": f"{size} bytes, over the inspector's size cap"}


def _redacted(value: Any, redact: Redact) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item, redact) for item in value]
    return value


@dataclass
class Attempt:
    """One request to a backend and what came of it."""

    why: str
    backend: str
    mode: str
    stream: bool
    sent: Any
    started: float
    duration_ms: float | None = None
    # A finished answer as the backend sent it; or the stream's chunks with
    # their time (ms since the attempt started).
    answer: Any = None
    chunks: list[Any] = field(default_factory=list)
    raw: str | None = None
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "why": self.why,
            "backend": self.backend,
            "mode": self.mode,
            "stream": self.stream,
            "duration_ms": self.duration_ms,
            "sent": self.sent,
            "answer": self.answer,
            "chunks": self.chunks,
            "raw": self.raw,
            "parsed": {
                "content": "".join(self.content),
                "reasoning": "".join(self.reasoning),
                "calls": self.calls,
                "rejected": self.rejected,
            },
            "error": self.error,
        }


class RequestRecord:
    """One request through the gateway: what the client sent, every attempt, and
    what the client got. Filled in by the server (the ends) and the round."""

    def __init__(self, record_id: str, method: str, path: str, budget: int, redact: Redact) -> None:
        self.id = record_id
        self.method = method
        self.path = path
        self.started = time.time()
        self._clock = time.perf_counter()
        self.budget = Budget(budget, redact)
        self.attempts: list[Attempt] = []
        self.client_sent: Any = None
        # The response's pieces as sent (text; a note where one was over the cap).
        # What the client got, in pieces as sent; joined and redacted at the end.
        self.client_got: list[str] = []
        self.status: int | None = None
        self.duration_ms: float | None = None
        self.notes: dict[str, Any] = {}
        self.done = False
        # What the client was answered (the round's last answer).
        self.calls_out = 0
        self.warning: str | None = None

    # --- the server's end ------------------------------------------------------

    def enter(self) -> Any:
        """Make this the record of the current context; returns the reset token."""
        return CURRENT_RECORD.set(self)

    @staticmethod
    def leave(token: Any) -> None:
        CURRENT_RECORD.reset(token)

    def finish(self, status: int, notes: dict[str, Any]) -> None:
        for entry in self.attempts:  # one the client left in the middle of, say
            self._settle(entry)
        self.client_got = [self.budget.redact("".join(self.client_got))]
        self.status = status
        self.notes = notes
        self.duration_ms = round((time.perf_counter() - self._clock) * 1000, 1)
        self.done = True

    # --- the round's end ---------------------------------------------------------

    def attempt(self, backend: str, mode: str, body: Any, *, stream: bool, why: str) -> Attempt:
        """A new attempt, sending ``body``."""
        entry = Attempt(why, backend, mode, stream, self.budget.keep(body), time.perf_counter())
        self.attempts.append(entry)
        return entry

    def answered(self, entry: Attempt, answer: Any) -> None:
        entry.answer = self.budget.keep(answer)
        self._ended(entry)

    def chunk(self, entry: Attempt, chunk: Any) -> None:
        """A streamed chunk with its time: counted now, redacted with the others (_settle)."""
        at = round((time.perf_counter() - entry.started) * 1000, 1)
        size = len(orjson.dumps(chunk, default=str))
        if self.budget.fits(size):
            entry.chunks.append({"ms": at, "chunk": chunk})
        else:
            entry.chunks.append({"ms": at, "chunk": self.budget.note(size)})

    def sent(self, text: str) -> None:
        """A piece of the answer the client got (counted now, redacted at the end)."""
        if self.budget.fits(len(text)):
            self.client_got.append(text)
        else:
            self.client_got.append(f"[{self.budget.note(len(text))['toolrelay_truncated']}]")

    def parsed(
        self,
        entry: Attempt,
        events: Iterable[Event],
        raw: str | None = None,
        formats: dict[str, str] | None = None,
    ) -> None:
        """What the parser made of the attempt's answer (its events); ``formats``:
        a call parsed from text, by id -> the format it was written in."""
        for event in events:
            # Text comes in small pieces: counted here, redacted once joined (_settle).
            if isinstance(event, ContentDelta):
                if self.budget.fits(len(event.text)):
                    entry.content.append(event.text)
            elif isinstance(event, ReasoningDelta):
                if self.budget.fits(len(event.text)):
                    entry.reasoning.append(event.text)
            elif isinstance(event, ToolCallEnd):
                call = {"id": event.call.id, "name": event.call.name}
                call["format"] = (formats or {}).get(event.call.id, "native")
                call["arguments"] = self.budget.keep(event.call.arguments)
                entry.calls.append(call)
            elif isinstance(event, CallRejected):
                rejected = event.call
                entry.rejected.append(
                    {
                        "name": rejected.name,
                        "reason": rejected.reason,
                        "raw": self.budget.keep(rejected.raw),
                    }
                )
        if raw is not None:
            entry.raw = self.budget.keep(raw)

    def answer_out(self, calls: int, warning: str | None) -> None:
        """What the round answered the client (the last round's, for an agent turn)."""
        self.calls_out = calls
        self.warning = warning

    def failed(self, entry: Attempt, error: str) -> None:
        entry.error = error
        self._ended(entry)

    def streamed(self, entry: Attempt) -> None:
        self._ended(entry)

    def _ended(self, entry: Attempt) -> None:
        self._settle(entry)
        entry.duration_ms = round((time.perf_counter() - entry.started) * 1000, 1)

    def _settle(self, entry: Attempt) -> None:
        """The attempt's text pieces joined and redacted."""
        for pieces in (entry.content, entry.reasoning):
            pieces[:] = [self.budget.redact("".join(pieces))] if pieces else []
        if entry.chunks:
            text = orjson.dumps(entry.chunks, default=str).decode()
            if self.budget.redact(text) != text:
                entry.chunks = _redacted(entry.chunks, self.budget.redact)

    # --- reading -----------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """The line of the live list."""
        last = self.attempts[-1] if self.attempts else None
        return {
            "id": self.id,
            "time": self.started,
            "front": self.path,
            "model": self.notes.get("model"),
            "backend": last.backend if last else None,
            "path": self.notes.get("mode") or (last.mode if last else None),
            "status": self.status,
            "duration_ms": self.duration_ms,
            "attempts": len(self.attempts),
            "calls": self.calls_out,
            "repairs": sum(a.why == CORRECTION for a in self.attempts),
            "warning": self.warning,
            "done": self.done,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "client_sent": self.client_sent,
            "attempts": [attempt.to_dict() for attempt in self.attempts],
            "client_got": "".join(self.client_got),
            "truncated_pieces": self.budget.cut,
        }
