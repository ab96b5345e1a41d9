"""The OpenAI wire shapes: completion objects and SSE chunks.

Every chunk of one stream shares ``id``, ``created`` and ``model``, so their
JSON prefix and suffix are encoded once and only the delta is serialised per
token. The rules followed are those of ``openai-streaming.md``: ``id``,
``type`` and ``name`` once per call index, argument fragments after, one
index per chunk, ``usage: null`` on every chunk only when usage was asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from toolrelay.events import (
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCallArgumentsDelta,
    ToolCallStart,
)
from toolrelay.io import ids
from toolrelay.io.round import ContentRun, Finish, Reply
from toolrelay.jsonbytes import dumps as _dumps
from toolrelay.server.errors import APIError

# The ids' function as a global, read at each call: tests switch it (patch), where
# a compiled module's function imported by name would be called directly.
unique_hex: Callable[[], str] = ids.unique_hex

# Final, as every constant here: read where it stands (docs/compiled.md).
KEEPALIVE: Final = b": keep-alive\n\n"
DONE: Final = b"data: [DONE]\n\n"
_ZERO_USAGE: Final[dict[str, int]] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
# The delta a stream opens with.
_START_DELTA: Final = _dumps({"role": "assistant", "content": None})
# What ends every choice chunk of a stream but its last, with ``usage: null`` when
# usage was asked for and without; and the same after a content delta's text
# (its object closed), and after a run's last text (its closing quote before).
_TAIL: Final = b',"logprobs":null,"finish_reason":null}]}\n\n'
_TAIL_USAGE: Final = b',"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
_CONTENT_TAIL: Final = b"}" + _TAIL
_CONTENT_TAIL_USAGE: Final = b"}" + _TAIL_USAGE
_RUN_TAIL: Final = b'"' + _CONTENT_TAIL
_RUN_TAIL_USAGE: Final = b'"' + _CONTENT_TAIL_USAGE


def completion_id() -> str:
    return "chatcmpl-" + unique_hex()


def completion(reply: Reply, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` object for a finished round."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.calls
        ]
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    out: dict[str, Any] = {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": reply.usage or _ZERO_USAGE,
    }
    out.update(extra)
    return out


class ChunkEncoder:
    """SSE ``data:`` lines of one ``chat.completion.chunk`` stream."""

    keepalive = KEEPALIVE

    def __init__(self, model: str, include_usage: bool) -> None:
        self._id = completion_id()
        self._created = int(time.time())
        self._model = model
        self.include_usage = include_usage
        # Every chunk of the stream opens with the same keys, written once here
        # (as orjson writes ``_common``: keys in order, no spaces), in one build of
        # the literal's pieces, where encoding the dict built it first.
        id_json: bytes = _dumps(self._id)
        model_json: bytes = _dumps(model)
        opening = b'data: {"id":%b,"object":"chat.completion.chunk","created":%d,"model":%b' % (
            id_json,
            self._created,
            model_json,
        )
        self._head = opening + b',"choices":[{"index":0,"delta":'
        # Around a content delta's text, the most frequent chunk: two joins per chunk.
        self._content_head = self._head + b'{"content":'
        if include_usage:
            self._tail = _TAIL_USAGE
            self._content_tail = _CONTENT_TAIL_USAGE
            self._run_tail = _RUN_TAIL_USAGE
            self._finish_tail = b'}],"usage":null}\n\n'
        else:
            self._tail = _TAIL
            self._content_tail = _CONTENT_TAIL
            self._run_tail = _RUN_TAIL
            self._finish_tail = b"}]}\n\n"
        # A run's chunks, each text between its quotes: the run in one join.
        self._run_head = self._content_head + b'"'
        self._run_between = (self._run_tail + self._run_head).decode()
        # Around the finish reason and the usage: the stream's end without a dict.
        self._finish_head = self._head + b'{},"logprobs":null,"finish_reason":'
        self._usage_head = opening + b',"choices":[],"usage":'

    @property
    def _common(self) -> dict[str, Any]:
        """The keys every chunk of the stream opens with (``_head`` writes them):
        built only for a chunk made whole, rare, not for every stream."""
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
        }

    def delta(self, delta: dict[str, Any]) -> bytes:
        return self._head + _dumps(delta) + self._tail

    def start(self) -> bytes:
        return self._head + _START_DELTA + self._tail

    def event(self, event: Event) -> bytes | None:
        """The chunk for one parser event; None for events with nothing to send."""
        if isinstance(event, ContentDelta):
            if not event.text:
                return None
            # The most frequent chunk of all: the delta written without building its dict.
            return self._content_head + _dumps(event.text) + self._content_tail
        if isinstance(event, ToolCallArgumentsDelta):
            if not event.text:
                return None
            # The most frequent chunk of a call, written without building its dict.
            return (
                self._head
                + b'{"tool_calls":[{"index":%d,"function":{"arguments":' % event.index
                + _dumps(event.text)
                + b"}}]}"
                + self._tail
            )
        if isinstance(event, ToolCallStart):
            # Once a call, written without building its dict either.
            return (
                self._head
                + b'{"tool_calls":[{"index":%d,"id":' % event.index
                + _dumps(event.id)
                + b',"type":"function","function":{"name":'
                + _dumps(event.name)
                + b',"arguments":""}}]}'
                + self._tail
            )
        if isinstance(event, ReasoningDelta):
            return self.delta({"reasoning_content": event.text}) if event.text else None
        return None  # ToolCallEnd: the fragments already carried the call

    def run(self, run: ContentRun) -> bytes:
        """The chunks of a run's texts, as :meth:`event` writes each text's
        ``ContentDelta``: none is empty, and each one's JSON string is the text
        between two quotes (a ``ContentRun``'s promise), so the run is one join."""
        return self._run_head + self._run_between.join(run.texts).encode() + self._run_tail

    def finish(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        """The last choice chunk (toolrelay's own keys ride on it, top level),
        the usage chunk when asked for, and ``[DONE]``. Written around the
        values from the stream's own bytes; a chunk with toolrelay's keys (a
        warning, a loop's verdict: rare) is built whole."""
        if extra:
            out = b"data: " + _dumps(self._finish_chunk(finish, extra)) + b"\n\n"
        else:
            out = self._finish_head + _dumps(finish.reason) + self._finish_tail
        if self.include_usage:
            out += self._usage_head + _dumps(finish.usage or _ZERO_USAGE) + b"}\n\n"
        return out + DONE

    def _finish_chunk(self, finish: Finish, extra: dict[str, Any]) -> dict[str, Any]:
        """The last choice chunk with toolrelay's keys (what ``_finish_head`` and
        ``_finish_tail`` write when there are none)."""
        chunk = {
            **self._common,
            "choices": [
                {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish.reason}
            ],
        }
        if self.include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    def error(self, error: APIError) -> bytes:
        return b"data: " + _dumps(error.to_dict()) + b"\n\n"
