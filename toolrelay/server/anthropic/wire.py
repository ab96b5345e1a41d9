"""The Anthropic Messages wire shapes: the message, its stream events, errors.

One :class:`MessageBuilder` (a :class:`~toolrelay.server.blocks.Blocks`)
turns the parser's events into content blocks and says each change as the
stream events the anthropic SDK accumulates (docs/anthropic-messages.md):
``message_start``; per block, in order and never interleaved,
``content_block_start``, its deltas, ``content_block_stop``; then
``message_delta`` with the stop reason and usage, and ``message_stop``. A
finished reply's message is made whole at once (:func:`whole_message`), the
message the builder would hold after its events: held to it by
``tests/fronts/test_messages_whole.py``, so a message and a stream of it
always agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from mypy_extensions import mypyc_attr

from toolrelay.events import Event, ToolCall, ToolCallStart
from toolrelay.io.ids import unique_hex
from toolrelay.io.round import ContentRun, Finish, Reply
from toolrelay.server.blocks import Blocks, Kind, WireEvent, sse
from toolrelay.server.errors import APIError

PING = b'event: ping\ndata: {"type":"ping"}\n\n'
# A stream's first bytes: ``message_start`` (its message's id and model left out,
# every other value fixed until the end) and, as Anthropic does, a ping.
_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"%b","type":"message",'
    b'"role":"assistant","model":%b,"content":[],"stop_reason":null,"stop_sequence":null,'
    b'"usage":{"input_tokens":0,"output_tokens":0}}}\n\n' + PING
)
# A text block's start, its index left out.
_TEXT_START = (
    b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)
# Any block's stop, its index left out.
_BLOCK_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n'
# A stream's last bytes without toolrelay's keys: ``message_delta`` (its stop
# reason, stop sequence and usage left out) and ``message_stop``.
_END = (
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":%b,'
    b'"stop_sequence":%b},"usage":%b}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
)
# A tool_use block's start, its index, the call's id and name (JSON) left out.
_CALL_START = (
    b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
    b'"content_block":{"type":"tool_use","id":%b,"name":%b,"input":{}}}\n\n'
)
# A call's arguments delta, its block's index and the fragment (JSON) left out.
_CALL_DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"input_json_delta","partial_json":%b}}\n\n'
)
# A text delta's SSE bytes around its text, its block's index left out.
_TEXT_DELTA_HEAD = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
    b'"delta":{"type":"text_delta","text":'
)
_TEXT_DELTA_TAIL = b"}}\n\n"
# After the last text of a run, its closing quote.
_RUN_TAIL = b'"' + _TEXT_DELTA_TAIL
_STOP_REASONS = {"length": "max_tokens", "content_filter": "refusal"}
# Every stop reason :func:`_stop` gives, as JSON: encoded once, not at every stream's end.
_STOP_REASONS_JSON = {
    reason: orjson.dumps(reason)
    for reason in ("tool_use", "stop_sequence", "end_turn", *_STOP_REASONS.values())
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


# Compiled (setup.py), and tests subclass it to count what goes text by text.
@mypyc_attr(allow_interpreted_subclasses=True)
class MessageBuilder(Blocks):
    """The message for one answer, built from the parser's events; each step
    returns the stream events that say it. Reasoning becomes ``thinking``
    blocks when the request enabled thinking."""

    def __init__(self, model: str, thinking: bool) -> None:
        super().__init__(reasoning=thinking)
        self.message: dict[str, Any] = {
            "id": "msg_" + unique_hex(),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._content: list[dict[str, Any]] = self.message["content"]
        # The open text block's delta, its text left out (``%b``): one formatting
        # per delta, cheaper than two joins; and a run's pieces, each text between
        # quotes: before the first text, and between two (set when a text block opens).
        self._text_delta = b""
        self._run_head = b""
        self._run_between = ""
        self._called = False  # a tool_use block was opened: the stop reason says so
        # The open call block's delta, its fragment left out (``%b``; set when it opens).
        self._call_delta = b""

    def start(self) -> bytes:
        """What the stream opens with, before any content: ``message_start`` (the
        message as it stands) and a ping, written around the message's id and model."""
        message = self.message
        return _START % (message["id"].encode(), orjson.dumps(message["model"]))

    def open(self, kind: Kind, start: ToolCallStart | None) -> list[WireEvent]:
        block = self._new_block(kind, start)
        index = len(self._content) - 1
        return [{"type": "content_block_start", "index": index, "content_block": dict(block)}]

    def text_open_bytes(self) -> bytes:
        self._new_block("text", None)
        return _TEXT_START % (len(self._content) - 1)

    def call_open_bytes(self, start: ToolCallStart) -> bytes:
        self._new_block("call", start)
        index = len(self._content) - 1
        # The open call's delta, its fragment left out: one formatting per delta.
        self._call_delta = _CALL_DELTA.replace(b"%d", b"%d" % index, 1)
        return _CALL_START % (index, orjson.dumps(start.id), orjson.dumps(start.name))

    def call_delta_bytes(self, text: str) -> bytes:
        return self._call_delta % orjson.dumps(text)

    def call_close_bytes(self, text: str, call: ToolCall | None) -> bytes:
        self._complete("call", text, call)
        return _BLOCK_STOP % (len(self._content) - 1)

    def _new_block(self, kind: Kind, start: ToolCallStart | None) -> dict[str, Any]:
        """The message's new last block, empty (its start said by the caller)."""
        if start is not None:
            block = {"type": "tool_use", "id": start.id, "name": start.name, "input": {}}
            self._called = True
        elif kind == "text":
            block = {"type": "text", "text": ""}
        else:
            # No signature: the model server gave none, and toolrelay makes none up.
            block = {"type": "thinking", "thinking": "", "signature": ""}
        self._content.append(block)
        if kind == "text":
            index = len(self._content) - 1
            head = _TEXT_DELTA_HEAD % index
            self._text_delta = head + b"%b" + _TEXT_DELTA_TAIL
            self._run_head = head + b'"'
            self._run_between = (_RUN_TAIL + self._run_head).decode()
        return block

    def delta(self, kind: Kind, text: str) -> WireEvent:
        if kind == "text":
            delta = {"type": "text_delta", "text": text}
        elif kind == "call":
            delta = {"type": "input_json_delta", "partial_json": text}
        else:
            delta = {"type": "thinking_delta", "thinking": text}
        return {"type": "content_block_delta", "index": len(self._content) - 1, "delta": delta}

    def text_delta_bytes(self, text: str) -> bytes:
        # From a byte template: the same bytes (orjson writes the keys in order,
        # without spaces).
        return self._text_delta % orjson.dumps(text)

    def text_run_bytes(self, texts: list[str]) -> bytes:
        return self._run_head + self._run_between.join(texts).encode() + _RUN_TAIL

    def close(self, kind: Kind, text: str, call: ToolCall | None) -> list[WireEvent]:
        self._complete(kind, text, call)
        return [{"type": "content_block_stop", "index": len(self._content) - 1}]

    def _complete(self, kind: Kind, text: str, call: ToolCall | None) -> None:
        """The last block made whole: its text, or the call's input."""
        block = self._content[-1]
        if kind == "call":
            # The call's own JSON, verbatim: its arguments may hold integers
            # beyond 64 bits, which a dict would not serialise.
            arguments = call.arguments_json if call is not None else _json_object(text)
            block["input"] = orjson.Fragment(arguments)
        else:
            block[block["type"]] = text

    def finish(self, finish: Finish, extra: dict[str, Any]) -> list[WireEvent]:
        """Close the message: the last events, with toolrelay's own keys on ``message_delta``."""
        out = self.end_block()
        reason, stop_sequence, counts = self._finished(finish, extra)
        delta = {"stop_reason": reason, "stop_sequence": stop_sequence}
        out.append({"type": "message_delta", "delta": delta, "usage": counts, **extra})
        out.append({"type": "message_stop"})
        return out

    def finish_bytes(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        """:meth:`finish`'s events through :func:`sse`, the same bytes: written
        around their values unless toolrelay adds keys of its own (a warning, a
        loop's verdict: rare), whose events are built whole."""
        if extra:
            return b"".join(map(sse, self.finish(finish, extra)))
        out = b""
        if self._kind is not None:  # the open block ends, as end_block ends it
            self._complete(*self._take_block(), None)
            out = _BLOCK_STOP % (len(self._content) - 1)
        reason, stop_sequence, counts = self._finished(finish, extra)
        return out + _END % (
            _STOP_REASONS_JSON[reason],
            b"null" if stop_sequence is None else orjson.dumps(stop_sequence),
            orjson.dumps(counts),
        )

    def _finished(
        self, finish: Finish, extra: dict[str, Any]
    ) -> tuple[str, str | None, dict[str, int]]:
        """The message's stop reason, stop sequence and usage, set on it with ``extra``."""
        reason, stop_sequence = _stop(self._called, finish.reason, finish.stop_sequence)
        counts = _counts(finish.usage)
        message = self.message
        message["stop_reason"] = reason
        message["stop_sequence"] = stop_sequence
        message["usage"] = counts
        if extra:
            message.update(extra)
        return reason, stop_sequence, counts


def whole_message(
    model: str, thinking: bool, reply: Reply, extra: dict[str, Any]
) -> dict[str, Any]:
    """The non-streamed message of a finished reply, its blocks made whole at
    once: what a :class:`MessageBuilder` fed ``reply_events(reply)`` and then
    finished holds in its ``message``, without the stream's events, which a
    non-streamed answer never sends."""
    message_id = "msg_" + unique_hex()
    content: list[dict[str, Any]] = []
    if thinking and reply.reasoning:
        # No signature: the model server gave none, and toolrelay makes none up.
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    # A text block never starts or ends with blanks (Blocks holds them back).
    text = reply.content.strip() if reply.content else ""
    if text:
        content.append({"type": "text", "text": text})
    for call in reply.calls:
        # The call's own JSON, verbatim, as the builder's close writes it.
        arguments = orjson.Fragment(call.arguments_json)
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    reason, stop_sequence = _stop(bool(reply.calls), reply.finish_reason, reply.stop_sequence)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": stop_sequence,
        "usage": _counts(reply.usage),
        **extra,
    }


def _stop(called: bool, reason: str, stop_sequence: str | None) -> tuple[str, str | None]:
    """The message's ``stop_reason`` and ``stop_sequence``: ``called`` when it holds a call."""
    if called:
        return "tool_use", None
    if stop_sequence is not None:
        return "stop_sequence", stop_sequence
    return _STOP_REASONS.get(reason, "end_turn"), None


def _counts(usage: dict[str, Any] | None) -> dict[str, int]:
    """The message's usage from the backend's (Chat Completions') counts."""
    if not usage:
        return {"input_tokens": 0, "output_tokens": 0}
    return {
        "input_tokens": _count(usage.get("prompt_tokens")),
        "output_tokens": _count(usage.get("completion_tokens")),
    }


def _json_object(text: str) -> str:
    """A call's arguments from its fragments when it ended without its call:
    the fragments if they make a JSON object, else an empty object."""
    try:
        return text if isinstance(orjson.loads(text), dict) else "{}"
    except orjson.JSONDecodeError:
        return "{}"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class MessageEncoder:
    """The SSE bytes of one streamed message (the turn's :class:`Encoder`)."""

    keepalive = PING

    def __init__(self, model: str, thinking: bool) -> None:
        self.builder = MessageBuilder(model, thinking)
        # The builder's own methods, not ones calling them: a call less per event.
        self.event: Callable[[Event], bytes | None] = self.builder.stream_event
        self.run: Callable[[ContentRun], bytes | None] = self.builder.stream_run

    def start(self) -> bytes:
        return self.builder.start()

    def finish(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        return self.builder.finish_bytes(finish, extra)

    def error(self, error: APIError) -> bytes:
        return sse(error_body(error))


def error_body(error: APIError) -> dict[str, Any]:
    """Anthropic's error object for ``error``, whose status is kept."""
    kind = _ERROR_TYPES.get(error.status)
    if kind is None:
        kind = "api_error" if error.status >= 500 else "invalid_request_error"
    return {"type": "error", "error": {"type": kind, "message": error.message}}
