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
from toolrelay.io import ids
from toolrelay.io.round import ContentRun, Finish, Reply
from toolrelay.server.blocks import Blocks, Kind, WireEvent, sse
from toolrelay.server.errors import APIError

# The ids' function as a global, read at each call: tests switch it (patch), where
# a compiled module's function imported by name would be called directly.
unique_hex: Callable[[], str] = ids.unique_hex

PING = b'event: ping\ndata: {"type":"ping"}\n\n'
# The stream's events are written around their values from byte templates (orjson
# writes the same bytes: keys in order, no spaces). Each template is a literal in
# the one place it is formatted: compiled, a literal's ``%`` with typed values is
# one build of its pieces (CPyBytes_Build), where a module constant's is the
# generic ``%`` (PyNumber_Remainder), some 700 instructions dearer a formatting.
# Only with values typed ``bytes`` and ``int``: orjson's ``dumps`` is untyped to the
# compiler (its stubs are not in the build's environment), so its results are
# named ``bytes`` first.
# After the last text of a run, its closing quote and the delta's end.
_RUN_TAIL = b'"}}\n\n'
_STOP_REASONS = {"length": "max_tokens", "content_filter": "refusal"}
# Every stop reason :func:`_stop` gives, as JSON: encoded once, not at every stream's end.
_STOP_REASONS_JSON: dict[str, bytes] = {
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
        # The blocks' list named here and in the message: not looked up in it again.
        content: list[dict[str, Any]] = []
        self.message: dict[str, Any] = {
            "id": "msg_" + unique_hex(),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        self._content = content
        # The open text block's delta up to its text, and a run's pieces, each text
        # between quotes: before the first text, and between two (set when a text
        # block opens).
        self._text_head = b""
        self._run_head = b""
        self._run_between = ""
        self._called = False  # a tool_use block was opened: the stop reason says so
        # The open call block's delta up to its fragment (set when it opens).
        self._call_head = b""

    def start(self) -> bytes:
        """What the stream opens with, before any content: ``message_start`` (the
        message as it stands) and a ping, written around the message's id and model."""
        message = self.message
        message_id: str = message["id"]
        model: bytes = orjson.dumps(message["model"])
        return (
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"%b",'
            b'"type":"message","role":"assistant","model":%b,"content":[],"stop_reason":null,'
            b'"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}\n\n%b'
        ) % (message_id.encode(), model, PING)

    def open(self, kind: Kind, start: ToolCallStart | None) -> list[WireEvent]:
        block = self._new_block(kind, start)
        index = len(self._content) - 1
        return [{"type": "content_block_start", "index": index, "content_block": dict(block)}]

    def text_open_bytes(self) -> bytes:
        self._new_block("text", None)
        return (
            b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
            b'"content_block":{"type":"text","text":""}}\n\n'
        ) % (len(self._content) - 1)

    def call_open_bytes(self, start: ToolCallStart) -> bytes:
        self._new_block("call", start)
        index = len(self._content) - 1
        call_id: bytes = orjson.dumps(start.id)
        name: bytes = orjson.dumps(start.name)
        self._call_head = (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            b'"delta":{"type":"input_json_delta","partial_json":'
        ) % index
        return (
            b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,'
            b'"content_block":{"type":"tool_use","id":%b,"name":%b,"input":{}}}\n\n'
        ) % (index, call_id, name)

    def call_delta_bytes(self, text: str) -> bytes:
        fragment: bytes = orjson.dumps(text)
        return b"%b%b}}\n\n" % (self._call_head, fragment)

    def call_close_bytes(self, text: str, call: ToolCall | None) -> bytes:
        self._complete("call", text, call)
        return _block_stop(len(self._content) - 1)

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
            self._text_head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                b'"delta":{"type":"text_delta","text":'
            ) % (len(self._content) - 1)
            self._run_head = self._text_head + b'"'
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
        written: bytes = orjson.dumps(text)
        return b"%b%b}}\n\n" % (self._text_head, written)

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
            out = _block_stop(len(self._content) - 1)
        reason, stop_sequence, counts = self._finished(finish, extra)
        sequence: bytes = b"null" if stop_sequence is None else orjson.dumps(stop_sequence)
        usage: bytes = orjson.dumps(counts)
        # ``message_delta`` and ``message_stop``.
        return (
            b'%bevent: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":%b,'
            b'"stop_sequence":%b},"usage":%b}\n\nevent: message_stop\ndata: {"type":"message_stop"}'
            b"\n\n"
        ) % (out, _STOP_REASONS_JSON[reason], sequence, usage)

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


def _block_stop(index: int) -> bytes:
    """Any block's ``content_block_stop``."""
    return b'event: content_block_stop\ndata: {"type":"content_block_stop","index":%d}\n\n' % index


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
