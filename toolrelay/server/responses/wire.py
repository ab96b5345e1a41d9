"""The OpenAI Responses wire shapes: the response object and its stream events.

One :class:`ResponseBuilder` (a :class:`~toolrelay.server.blocks.Blocks`)
turns the parser's events into output items (``message`` with one
``output_text`` part, ``function_call``, and ``reasoning`` when the request
asked for reasoning) and says each change as the typed events the openai
SDK's Responses helpers accumulate (docs/openai-responses.md): every event
numbered by ``sequence_number``; ``response.created`` first; per item, never
interleaved, ``output_item.added``, its part and deltas, the matching
``.done`` events and ``output_item.done``; ``response.completed`` (or
``response.incomplete``) last, carrying the whole response. A finished reply
is made whole at once (:func:`whole_response`), each item as the builder's
would end, so a response and a stream of it agree (a property test holds the
two alike).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Literal

import orjson

from toolrelay.events import ToolCall, ToolCallStart
from toolrelay.io import ids
from toolrelay.io.round import Finish, Reply
from toolrelay.jsonbytes import dumps as _dumps
from toolrelay.server.blocks import Blocks, Kind, WireEvent, sse
from toolrelay.server.errors import APIError

# The ids' function as a global, read at each call: tests switch it (patch), where
# a compiled module's function imported by name would be called directly.
unique_hex: Callable[[], str] = ids.unique_hex

KEEPALIVE = b": keep-alive\n\n"
# The constants a stream reads are ``Final``: read where they stand (docs/compiled.md).

# The response object's fields that repeat the request, in the API's order, and
# their values when the request leaves them out; a turn's ``echo`` holds those
# it sets otherwise. The objects are written as they are by orjson and never
# changed: one each for every response, not containers made and encoded each time.
_ECHOED: Final[dict[str, Any]] = {
    "instructions": None,
    "max_output_tokens": None,
    "previous_response_id": None,
    "temperature": None,
    "top_p": None,
    "metadata": orjson.Fragment(b"{}"),
    "parallel_tool_calls": True,
    "reasoning": orjson.Fragment(b'{"effort":null,"summary":null}'),
    "text": orjson.Fragment(b'{"format":{"type":"text"}}'),
    "tool_choice": "auto",
    "tools": orjson.Fragment(b"[]"),
    "store": True,
}


def echo_json(echo: dict[str, Any]) -> bytes:
    """The response's fields that repeat the request, ``echo`` over their
    defaults (its keys are ``_ECHOED``'s), as the response's JSON holds them:
    what a kept tool list's read writes once for every response that echoes it
    (``ResponseBuilder``'s ``echoed``)."""
    echoed = _ECHOED.copy()
    echoed.update(echo)
    written: bytes = _dumps(echoed)
    return written[1:-1]


# The echo of a request that sets none of its fields (every stream without tools).
_NO_ECHO: Final = echo_json({})
# The usage's details: always these zeros (a model server reports neither cached
# nor reasoning tokens apart). Written as they are by orjson and never changed:
# one object each for every response, not two dicts made and encoded each time.
_INPUT_DETAILS: Final = orjson.Fragment(b'{"cached_tokens":0,"cache_write_tokens":0}')
_OUTPUT_DETAILS: Final = orjson.Fragment(b'{"reasoning_tokens":0}')
# A response's usage, its counts (zeros here) set for each response.
_USAGE: Final[dict[str, Any]] = {
    "input_tokens": 0,
    "input_tokens_details": _INPUT_DETAILS,
    "output_tokens": 0,
    "output_tokens_details": _OUTPUT_DETAILS,
    "total_tokens": 0,
}
_INCOMPLETE: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}
_PREFIXES: Final = {"text": "msg_", "call": "fc_", "reasoning": "rs_"}
_DELTAS: Final = {
    "text": "response.output_text.delta",
    "reasoning": "response.reasoning_text.delta",
}
# The stream's events are written around their values from byte templates (orjson
# writes the same bytes: keys in order, no spaces). Each template is a literal in
# the one place it is formatted: compiled, a literal's ``%`` with values typed
# ``bytes`` and ``int`` is one build of its pieces (CPyBytes_Build), where a module
# constant's is the generic ``%`` (PyNumber_Remainder), some 1,000 instructions
# dearer a formatting. orjson's ``dumps`` is untyped to the compiler (its stubs are
# not in the build's environment): ``_dumps`` is typed, and its results are named
# ``bytes`` too.
# A text delta's SSE bytes before its sequence number, and after its text.
_TEXT_DELTA_HEAD: Final = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":'
)
_TEXT_DELTA_TAIL: Final = b',"logprobs":[]}\n\n'
# A run's text deltas, each text between quotes: what stands before the first
# one's number, between a text and the next one's number, and after the last text
# (as text, joined with the texts and encoded once).
_RUN_HEAD: Final = _TEXT_DELTA_HEAD.decode()
_RUN_BETWEEN: Final = (b'"' + _TEXT_DELTA_TAIL + _TEXT_DELTA_HEAD).decode()
_RUN_TAIL: Final = (b'"' + _TEXT_DELTA_TAIL).decode()
# The started response's JSON (which ``start`` keeps) around its echo and model:
# the length of its head without its id and creation time (both written as they
# are: the id is hex, the time an int), of what stands from its status to its
# details, and of what follows the model while nothing is output.
_HEAD_LENGTH: Final = len(b'{"id":"","object":"response","created_at":,')
_STARTED_STATUS_LENGTH: Final = len(
    b'"status":"in_progress","background":false,"error":null,"incomplete_details":null,'
)
_STARTED_TAIL_LENGTH: Final = len(b',"output":[],"truncation":"disabled","usage":null,"user":null}')

# Sequence numbers as text, made once for every stream (a run's are a slice of
# them), up to a bound: a longer stream's later numbers are made as they come.
_NUMBERS: list[str] = []
_NUMBERS_KEPT = 8192


def _numbers(start: int, stop: int) -> list[str]:
    """``[str(n) for n in range(start, stop)]``."""
    if stop > len(_NUMBERS):
        if stop > _NUMBERS_KEPT:
            return [*map(str, range(start, stop))]
        _NUMBERS.extend(map(str, range(len(_NUMBERS), stop)))
    return _NUMBERS[start:stop]


def _new_id(prefix: str) -> str:
    return prefix + unique_hex()


class ResponseBuilder(Blocks):
    def __init__(
        self,
        model: str,
        echo: dict[str, Any],
        reasoning: bool,
        custom: frozenset[str] = frozenset(),
        namespaced: dict[str, tuple[str, str]] | None = None,
        summary: bool = False,
        echoed: bytes = b"",
    ) -> None:
        super().__init__(reasoning)
        # Calls of these (custom, freeform) tools are custom_tool_call items.
        self._custom = custom
        # Calls of a namespaced tool name it by its namespace and its own name.
        self._namespaced = namespaced or {}
        # Reasoning as summary parts (reasoning.summary was asked for), not content.
        self._summary = summary
        self.response = _started_response(_new_id("resp_"), model, echo)
        self._output: list[dict[str, Any]] = self.response["output"]
        self._sequence = 0
        # The open item's id and index, which every one of its events names.
        self._item_id = ""
        self._index = -1
        # The open message item's text delta between its sequence number and its
        # text; what stands between a run's number and its text, the opening quote
        # included; and the item's id (hex after its prefix: its JSON is it between
        # quotes, which the templates hold) and its id and index as its events name
        # them (set when the item opens).
        self._text_delta_where = b""
        self._run_where = ""
        self._text_item_id = b""
        self._text_where = b""
        # The open function_call item's delta between its sequence number and its
        # fragment (b"" for a call said through the general path), its id (hex
        # after its prefix, as the text item's) and name (JSON) and the item up to
        # its arguments (set when the call opens).
        self._call_where = b""
        self._call_item_id = b""
        self._call_name = b""
        self._call_item_head = b""
        # The started response's JSON (set by ``start``): its head, echo and model
        # are the completed response's.
        self._snapshot = b""
        # The first output item's JSON as its byte writer closed it (b"" until
        # then, and for one closed through the general path): a stream of that
        # item alone completes with it as its output, not the item encoded again.
        # The item is not changed after its close, and only the first is kept
        # (one value, not a list of every item's JSON carried through the stream).
        self._first_item = b""
        # ``echo_json(echo)`` when known ahead (a kept tool list's, or no echo at
        # all), for ``start`` to write the response around it; b"" when not.
        self._echoed = echoed or (b"" if echo else _NO_ECHO)

    def _emit(self, kind: str, **fields: Any) -> WireEvent:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _where(self) -> dict[str, Any]:
        return {"item_id": self._item_id, "output_index": self._index}

    def start(self) -> bytes:
        """The stream's first events, ``response.created`` and
        ``response.in_progress``: both carry the response as it stands (the
        request's tools and instructions echoed in it, no output yet), encoded once."""
        response = self.response
        snapshot: bytes
        if self._echoed and self._sequence == 0:
            # Not yet changed: written around its echo, its id (hex after its
            # prefix), creation time and model, where encoding the whole response
            # walks its twenty keys.
            response_id: str = response["id"]
            created_at: int = response["created_at"]
            model: bytes = _dumps(response["model"])
            snapshot = (
                b'{"id":"%b","object":"response","created_at":%d,"status":"in_progress",'
                b'"background":false,"error":null,"incomplete_details":null,%b,"model":%b,'
                b'"output":[],"truncation":"disabled","usage":null,"user":null}'
            ) % (response_id.encode(), created_at, self._echoed, model)
        else:
            snapshot = _dumps(response)
        self._snapshot = snapshot
        self._sequence = 2
        return (
            b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
            b'"response":%b}\n\nevent: response.in_progress\ndata: {"type":"response.in_progress",'
            b'"sequence_number":1,"response":%b}\n\n'
        ) % (snapshot, snapshot)

    def open(self, kind: Kind, start: ToolCallStart | None) -> list[WireEvent]:
        item = self._new_item(kind, start)
        out = [self._emit("response.output_item.added", output_index=self._index, item=dict(item))]
        if kind == "reasoning" and self._summary:
            out.append(
                self._emit(
                    "response.reasoning_summary_part.added",
                    **self._where(),
                    summary_index=0,
                    part=_part("summary", ""),
                )
            )
        elif start is None:
            out.append(
                self._emit(
                    "response.content_part.added",
                    **self._where(),
                    content_index=0,
                    part=_part(kind, ""),
                )
            )
        return out

    def text_open_bytes(self) -> bytes:
        self._new_item("text", None)
        sequence = self._sequence
        self._sequence += 2
        # The item's event and its part's.
        return (
            b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
            b'"sequence_number":%d,"output_index":%d,"item":{"id":"%b","type":"message",'
            b'"role":"assistant","content":[],"status":"in_progress"}}\n\n'
            b'event: response.content_part.added\ndata: {"type":"response.content_part.added",'
            b'"sequence_number":%d,%b,"content_index":0,"part":{"type":"output_text","text":"",'
            b'"annotations":[],"logprobs":[]}}\n\n'
        ) % (sequence, self._index, self._text_item_id, sequence + 1, self._text_where)

    def call_open_bytes(self, start: ToolCallStart) -> bytes | None:
        name = start.name
        if name in self._custom or name in self._namespaced:
            self._call_where = b""  # its events through the general path
            return None
        # The item made here, not through _new_item and _other_item (two calls
        # less a call; the text block's templates not looked at).
        item_id = "fc_" + unique_hex()  # _PREFIXES["call"], not looked up
        item = _open_call_item(item_id, start)
        output = self._output
        output.append(item)
        self._item_id = item_id
        self._index = index = len(output) - 1
        sequence = self._sequence
        self._sequence += 1
        # What the open call's events repeat, each made by one formatting (a
        # concatenation costs about as much as a formatting): the item's id, what
        # its deltas say between their number and fragment, its name, and the item
        # as it stands before its arguments, which its open says too.
        # (The id's JSON is the id between quotes: it is hex after its prefix.)
        said_id = item_id.encode()
        call_id: bytes = _dumps(start.id)
        name_json: bytes = _dumps(name)
        self._call_item_id = said_id
        self._call_where = b',"item_id":"%b","output_index":%d,"delta":' % (said_id, index)
        self._call_name = name_json
        self._call_item_head = head = (
            b'{"id":"%b","type":"function_call","call_id":%b,"name":%b'
            % (said_id, call_id, name_json)
        )
        return (
            b'event: response.output_item.added\ndata: {"type":"response.output_item.added",'
            b'"sequence_number":%d,"output_index":%d,"item":%b,"arguments":"",'
            b'"status":"in_progress"}}\n\n'
        ) % (sequence, index, head)

    def call_delta_bytes(self, text: str) -> bytes | None:
        if not self._call_where:
            said = self.delta("call", text)
            return sse(said) if said is not None else None
        sequence = self._sequence
        self._sequence += 1
        fragment: bytes = _dumps(text)
        return (
            b"event: response.function_call_arguments.delta\n"
            b'data: {"type":"response.function_call_arguments.delta","sequence_number":%d%b%b}\n\n'
        ) % (sequence, self._call_where, fragment)

    def call_close_bytes(self, text: str, call: ToolCall | None) -> bytes:
        if not self._call_where:
            return b"".join(map(sse, self.close("call", text, call)))
        item = self._output[-1]
        item["status"] = "completed"
        arguments = item["arguments"] = call.arguments_json if call is not None else text or "{}"
        said: bytes = _dumps(arguments)
        sequence = self._sequence
        self._sequence += 2
        index = self._index
        # The item's JSON, as its event says it (and, the first, as the output does).
        written = b'%b,"arguments":%b,"status":"completed"}' % (self._call_item_head, said)
        if index == 0:
            self._first_item = written
        # The arguments' event and the item's.
        return (
            b"event: response.function_call_arguments.done\n"
            b'data: {"type":"response.function_call_arguments.done","sequence_number":%d,'
            b'"item_id":"%b","output_index":%d,"name":%b,"arguments":%b}\n\n'
            b'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
            b'"sequence_number":%d,"output_index":%d,"item":%b}\n\n'
        ) % (
            sequence,
            self._call_item_id,
            index,
            self._call_name,
            said,
            sequence + 1,
            index,
            written,
        )

    def _new_item(self, kind: Kind, start: ToolCallStart | None) -> dict[str, Any]:
        """The response's new last output item, open (its events said by the caller)."""
        item: dict[str, Any]
        if start is None and kind == "text":  # the usual item
            item = _open_message_item(_new_id(_PREFIXES[kind]))
        else:
            item = self._other_item(kind, start)
        self._output.append(item)
        self._item_id = item["id"]
        self._index = len(self._output) - 1
        if kind == "text":
            # (The id's JSON is the id between quotes: it is hex after its prefix.)
            said_id = self._text_item_id = self._item_id.encode()
            # The item's id and index as every event of the item names them (``_where``).
            self._text_where = b'"item_id":"%b","output_index":%d' % (said_id, self._index)
            where = b',%b,"content_index":0,"delta":' % self._text_where
            self._text_delta_where = where
            self._run_where = (where + b'"').decode()
        return item

    def _other_item(self, kind: Kind, start: ToolCallStart | None) -> dict[str, Any]:
        """A new call or reasoning item."""
        if start is None:
            return {
                "id": _new_id(_PREFIXES[kind]),
                "type": "reasoning",
                "summary": [],
                "content": [],
                "status": "in_progress",
            }
        item: dict[str, Any]
        if start.name in self._custom:
            # The API gives custom tool calls no status.
            item = {
                "id": _new_id("ctc_"),
                "type": "custom_tool_call",
                "call_id": start.id,
                "name": start.name,
                "input": "",
            }
        else:
            item = _open_call_item(_new_id(_PREFIXES["call"]), start)
        if start.name in self._namespaced:
            item["namespace"], item["name"] = self._namespaced[start.name]
        return item

    def delta(self, kind: Kind, text: str) -> WireEvent | None:
        # The hot path: one literal per delta, no keyword merging.
        if kind == "call" and self._output[-1]["type"] == "custom_tool_call":
            return None  # its input is said whole when the call ends
        sequence = self._sequence
        self._sequence += 1
        if kind == "call":
            return {
                "type": "response.function_call_arguments.delta",
                "sequence_number": sequence,
                "item_id": self._item_id,
                "output_index": self._index,
                "delta": text,
            }
        if kind == "reasoning" and self._summary:
            return {
                "type": "response.reasoning_summary_text.delta",
                "sequence_number": sequence,
                "item_id": self._item_id,
                "output_index": self._index,
                "summary_index": 0,
                "delta": text,
            }
        event: WireEvent = {
            "type": _DELTAS[kind],
            "sequence_number": sequence,
            "item_id": self._item_id,
            "output_index": self._index,
            "content_index": 0,
            "delta": text,
        }
        if kind == "text":
            event["logprobs"] = []
        return event

    def text_delta_bytes(self, text: str) -> bytes:
        # One formatting costs less than joining five pieces.
        sequence = self._sequence
        self._sequence += 1
        written: bytes = _dumps(text)
        return (
            b"event: response.output_text.delta\n"
            b'data: {"type":"response.output_text.delta","sequence_number":%d%b%b,'
            b'"logprobs":[]}\n\n'
        ) % (sequence, self._text_delta_where, written)

    def text_run_bytes(self, texts: list[str]) -> bytes:
        # Four pieces a delta, put in place by two slice assignments and joined
        # once: its number, what stands between it and the text, the text, what
        # stands between the text and the next number (after the last: the tail).
        # The run's head and tail are among them, so that its bytes are copied
        # once from the joined text: added to the bytes, each copies them again.
        sequence = self._sequence
        count = len(texts)
        self._sequence += count
        pieces = ["", self._run_where, "", _RUN_BETWEEN] * count
        pieces[0::4] = _numbers(sequence, sequence + count)
        pieces[2::4] = texts
        pieces[0] = _RUN_HEAD + pieces[0]
        pieces[-1] = _RUN_TAIL
        return "".join(pieces).encode()

    def close(self, kind: Kind, text: str, call: ToolCall | None) -> list[WireEvent]:
        item = self._output[-1]
        where = self._where()
        if "status" in item:
            item["status"] = "completed"
        out = []
        if item["type"] == "custom_tool_call":
            item["input"] = custom_input(call.arguments if call is not None else _object(text))
            if item["input"]:
                out.append(
                    self._emit(
                        "response.custom_tool_call_input.delta", **where, delta=item["input"]
                    )
                )
            out.append(
                self._emit("response.custom_tool_call_input.done", **where, input=item["input"])
            )
        elif kind == "call":
            item["arguments"] = call.arguments_json if call is not None else text or "{}"
            out.append(
                self._emit(
                    "response.function_call_arguments.done",
                    **where,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            )
        elif self._summary and kind == "reasoning":
            part = _part("summary", text)
            item["summary"] = [part]
            out.append(
                self._emit(
                    "response.reasoning_summary_text.done", **where, summary_index=0, text=text
                )
            )
            out.append(
                self._emit(
                    "response.reasoning_summary_part.done", **where, summary_index=0, part=part
                )
            )
        else:
            part = _content_done(item, kind, text)
            if kind == "text":
                out.append(
                    self._emit(
                        "response.output_text.done",
                        **where,
                        content_index=0,
                        text=text,
                        logprobs=[],
                    )
                )
            else:
                out.append(
                    self._emit("response.reasoning_text.done", **where, content_index=0, text=text)
                )
            out.append(
                self._emit("response.content_part.done", **where, content_index=0, part=part)
            )
        out.append(
            self._emit("response.output_item.done", output_index=where["output_index"], item=item)
        )
        return out

    def finish(self, finish: Finish, extra: dict[str, Any]) -> list[WireEvent]:
        """Close the response: ``response.completed``, or ``response.incomplete``
        when the token limit (or a content filter) cut it short."""
        out = self.end_block()
        out.append(self._emit(self._finished(finish, extra), response=self.response))
        return out

    def finish_bytes(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        """:meth:`finish`'s events through :func:`sse`, the same bytes: when no
        block but a message item is open and toolrelay adds no keys of its own,
        written around their values (the item's text encoded once for its three
        events, the whole response once); otherwise built whole."""
        if extra or (self._kind is not None and self._kind != "text"):
            return b"".join(map(sse, self.finish(finish, extra)))
        closed = self._text_done(self._take_block()[1]) if self._kind is not None else b""
        kind = self._finished(finish, extra)
        sequence = self._sequence
        self._sequence += 1
        return self._ended(closed, kind, sequence)

    def _ended(self, closed: bytes, kind: str, sequence: int) -> bytes:
        """``closed`` (the events closing the open block, if any) and the last
        event, ``kind``, numbered ``sequence``, with the whole response
        (``finish_bytes``'s, no keys of toolrelay's own added), formatted as one:
        the response's event is the stream's biggest, and adding it to the other
        events copies both again. A completed stream that ``start`` opened reuses
        the started response's head and echo: only its output and usage are
        written (the response's other keys the stream never changes)."""
        response = self.response
        snapshot = self._snapshot
        if kind != "response.completed" or not snapshot:
            named = kind.encode()
            whole: bytes = _dumps(response)
            return b'%bevent: %b\ndata: {"type":"%b","sequence_number":%d,"response":%b}\n\n' % (
                closed,
                named,
                named,
                sequence,
                whole,
            )
        # Where the snapshot's status stands, by length: a search costs more.
        response_id: str = response["id"]
        created_at: int = response["created_at"]
        status_at = len(response_id) + len(str(created_at)) + _HEAD_LENGTH
        head = snapshot[:status_at]
        echo = snapshot[status_at + _STARTED_STATUS_LENGTH : len(snapshot) - _STARTED_TAIL_LENGTH]
        # The output and usage, each written by itself (a dict of the four keys
        # after the echo, made to be encoded once, costs more): the truncation and
        # user are the started response's, which no stream changes.
        # A stream of one item closed by its byte writer (the usual stream: one
        # call, or one message) has its output as that close wrote the item.
        items: list[dict[str, Any]] = response["output"]
        first = self._first_item
        output: bytes = b"[%b]" % first if first and len(items) == 1 else _dumps(items)
        usage = _usage_json(response["usage"])
        return (
            b'%bevent: response.completed\ndata: {"type":"response.completed",'
            b'"sequence_number":%d,"response":%b"status":"completed","background":false,'
            b'"error":null,"incomplete_details":null,%b,"output":%b,"truncation":"disabled",'
            b'"usage":%b,"user":null}}\n\n'
        ) % (closed, sequence, head, echo, output, usage)

    def _text_done(self, text: str) -> bytes:
        """The open message item closed with ``text``: :meth:`close`'s events for
        it through :func:`sse`, written around their values."""
        item = self._output[-1]
        item["status"] = "completed"
        _content_done(item, "text", text)
        sequence = self._sequence
        self._sequence += 3
        said: bytes = _dumps(text)
        where = self._text_where
        index = self._index
        # The item's JSON, as its event says it (and, the first, as the output does).
        written = (
            b'{"id":"%b","type":"message","role":"assistant","content":[{"type":"output_text",'
            b'"text":%b,"annotations":[],"logprobs":[]}],"status":"completed"}'
        ) % (self._text_item_id, said)
        if index == 0:
            self._first_item = written
        # Its text's two events and the item's.
        return (
            b'event: response.output_text.done\ndata: {"type":"response.output_text.done",'
            b'"sequence_number":%d,%b,"content_index":0,"text":%b,"logprobs":[]}\n\n'
            b'event: response.content_part.done\ndata: {"type":"response.content_part.done",'
            b'"sequence_number":%d,%b,"content_index":0,"part":{"type":"output_text","text":%b,'
            b'"annotations":[],"logprobs":[]}}\n\n'
            b'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
            b'"sequence_number":%d,"output_index":%d,"item":%b}\n\n'
        ) % (sequence, where, said, sequence + 1, where, said, sequence + 2, index, written)

    def _finished(self, finish: Finish, extra: dict[str, Any]) -> str:
        """The response's status, why it is incomplete and its usage set, with
        ``extra``; the name of the last event."""
        response = self.response
        # Set one by one, not by keywords: a dict of them made and merged costs more.
        status, details, usage = _outcome(finish.reason, finish.usage)
        response["status"] = status
        response["incomplete_details"] = details
        response["usage"] = usage
        if extra:
            response.update(extra)
        return "response.incomplete" if details else "response.completed"

    def failed(self, error: APIError) -> WireEvent:
        """``response.failed``: what a stream ends with when the turn fails midway
        (an item left open stays ``in_progress``)."""
        code = "server_error" if error.status >= 500 else "invalid_prompt"
        self.response.update(status="failed", error={"code": code, "message": error.message})
        return self._emit("response.failed", response=self.response)


def whole_response(
    model: str,
    echo: dict[str, Any],
    reply: Reply,
    text: str,
    extra: dict[str, Any],
    reasoning: bool,
    custom: frozenset[str],
    namespaced: dict[str, tuple[str, str]],
    summary: bool,
) -> dict[str, Any]:
    """The non-streamed response of a finished reply, each item made whole at
    once: what a :class:`ResponseBuilder` fed ``reply_events(reply)`` and then
    finished holds in its ``response`` (ids drawn in the items' order), without
    the stream's events, which a non-streamed answer never sends. ``text`` is the
    reply's :func:`answer_text`, which the caller keeps too; the other arguments
    are the builder's (positional: a keyword argument is matched by its name, on
    every non-streamed request)."""
    response_id = "resp_" + unique_hex()
    output: list[dict[str, Any]] = []
    if reasoning and reply.reasoning:
        output.append(_reasoning_item(reply.reasoning, summary))
    if text:
        output.append(_message_item(text))
    for call in reply.calls:
        output.append(_call_item(call, custom, namespaced))
    outcome = _outcome(reply.finish_reason, reply.usage)
    response = _response(response_id, model, echo, output, outcome)
    if extra:
        response.update(extra)
    return response


def answer_text(reply: Reply) -> str:
    """The text of a finished reply's message item: a text block never starts
    or ends with blanks (:class:`~toolrelay.server.blocks.Blocks`)."""
    return reply.content.strip() if reply.content else ""


def _response(
    response_id: str,
    model: str,
    echo: dict[str, Any],
    output: list[dict[str, Any]],
    outcome: tuple[str, dict[str, str] | None, dict[str, Any] | None],
) -> dict[str, Any]:
    """A response object: its status, why it is incomplete and its usage in
    ``outcome``; ``echo`` the fields that repeat the request where they differ from
    ``_SKELETON``'s."""
    status, details, usage = outcome
    # Copied whole and its values replaced: a dict literal this long is built
    # key by key, growing as it goes, several times dearer.
    response = _SKELETON.copy()
    response["id"] = response_id
    response["created_at"] = int(time.time())
    response["status"] = status
    response["incomplete_details"] = details
    response.update(echo)
    response["model"] = model
    response["output"] = output
    response["usage"] = usage
    return response


def _started_response(response_id: str, model: str, echo: dict[str, Any]) -> dict[str, Any]:
    """A streamed response as it starts, in progress, no output yet: ``_response``'s
    with the outcome ``("in_progress", None, None)``, copied from a skeleton that
    holds that outcome (three values not set again for every stream)."""
    response = _STARTED_SKELETON.copy()
    response["id"] = response_id
    response["created_at"] = int(time.time())
    response.update(echo)
    response["model"] = model
    response["output"] = []
    return response


# A response object's keys in the API's order, with the values no response
# changes and the echo's defaults; the others (None here) are every response's own.
_SKELETON: Final[dict[str, Any]] = {
    "id": None,
    "object": "response",
    "created_at": None,
    "status": None,
    "background": False,
    "error": None,
    "incomplete_details": None,
    **_ECHOED,
    "model": None,
    "output": None,
    "truncation": "disabled",
    "usage": None,
    "user": None,
}
# A streamed response's, until it finishes: in progress, its details and usage None.
_STARTED_SKELETON: Final[dict[str, Any]] = {**_SKELETON, "status": "in_progress"}


def _reasoning_item(text: str, summary: bool) -> dict[str, Any]:
    summarised = [_part("summary", text)] if summary else []
    return {
        "id": _new_id(_PREFIXES["reasoning"]),
        "type": "reasoning",
        "summary": summarised,
        "content": [] if summary else [_part("reasoning", text)],
        "status": "completed",
    }


# The items a stream opens, each copied and its own values set: a dict literal is
# built key by key, growing (some 650 instructions dearer an item, callgrind).
_OPEN_CALL_ITEM: Final[dict[str, Any]] = {
    "id": "",
    "type": "function_call",
    "call_id": "",
    "name": "",
    "arguments": "",
    "status": "in_progress",
}
_OPEN_MESSAGE_ITEM: Final[dict[str, Any]] = {
    "id": "",
    "type": "message",
    "role": "assistant",
    "content": None,
    "status": "in_progress",
}


def _open_call_item(item_id: str, start: ToolCallStart) -> dict[str, Any]:
    """A streamed function_call item as it opens: no arguments yet."""
    item = _OPEN_CALL_ITEM.copy()
    item["id"] = item_id
    item["call_id"] = start.id
    item["name"] = start.name
    return item


def _open_message_item(item_id: str) -> dict[str, Any]:
    """A streamed message item as it opens: no content yet (a list of its own)."""
    item = _OPEN_MESSAGE_ITEM.copy()
    item["id"] = item_id
    item["content"] = []
    return item


def _call_item(
    call: ToolCall, custom: frozenset[str], namespaced: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    item: dict[str, Any]
    if call.name in custom:
        # The API gives custom tool calls no status.
        item = {"id": _new_id("ctc_"), "type": "custom_tool_call", "call_id": call.id}
        item.update(name=call.name, input=custom_input(call.arguments))
    else:
        item = {"id": _new_id(_PREFIXES["call"]), "type": "function_call", "call_id": call.id}
        item.update(name=call.name, arguments=call.arguments_json, status="completed")
    if call.name in namespaced:
        item["namespace"], item["name"] = namespaced[call.name]
    return item


def _object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _outcome(
    reason: str, usage: dict[str, Any] | None
) -> tuple[str, dict[str, str] | None, dict[str, Any]]:
    """The finished response's status, why it is incomplete (the token limit or a
    content filter cut it short; None when it is not) and its usage."""
    usage = usage or {}
    given, made = usage.get("prompt_tokens"), usage.get("completion_tokens")
    # The usual counts, two ints as a model server sends them, are taken as they
    # are; anything else (absent, null, a float, a bool) goes through _count.
    if type(given) is not int or type(made) is not int:
        given, made = _count(given), _count(made)
    incomplete = _INCOMPLETE.get(reason)
    # Copied and its counts set: a dict literal is built key by key, growing
    # (2,100 instructions against 1,450, callgrind).
    counts = _USAGE.copy()
    counts["input_tokens"] = given
    counts["output_tokens"] = made
    counts["total_tokens"] = given + made
    if incomplete:
        return "incomplete", {"reason": incomplete}, counts
    return "completed", None, counts


# The largest count ``_usage_json`` writes in place: the largest int mypyc holds
# unboxed (2**62 - 1), so that its checks are comparisons of machine words, well
# within what orjson writes as it is (up to 2**64 - 1).
_COUNT_WRITTEN: Final = 4611686018427387903


def _usage_json(usage: dict[str, Any]) -> bytes:
    """``orjson.dumps(usage)`` of a finished response's usage (``_outcome``'s):
    the usual counts, ints from 0 to ``_COUNT_WRITTEN``, written into its
    template (1,600 instructions, callgrind, where orjson's call and its walk of
    the usage and its details cost some 2,100); any other through orjson (which
    refuses an int out of its range, as it did)."""
    given = usage["input_tokens"]
    made = usage["output_tokens"]
    if (
        type(given) is int
        and type(made) is int
        and 0 <= given <= _COUNT_WRITTEN
        and 0 <= made <= _COUNT_WRITTEN
    ):
        # The total is the two counts' sum (``_outcome``'s), not read again.
        return (
            b'{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0,'
            b'"cache_write_tokens":0},"output_tokens":%d,'
            b'"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}'
        ) % (given, made, given + made)
    written: bytes = _dumps(usage)
    return written


def _message_item(text: str) -> dict[str, Any]:
    # Every answer's item: its id drawn here, a call less than _new_id.
    return {
        "id": _PREFIXES["text"] + unique_hex(),
        "type": "message",
        "role": "assistant",
        "content": [_part("text", text)],
        "status": "completed",
    }


def custom_input(arguments: dict[str, Any]) -> str:
    """A custom tool call's input: its function's ``input``, as text."""
    value = arguments.get("input", "")
    return value if isinstance(value, str) else _dumps(value).decode()


def _content_done(item: dict[str, Any], kind: Kind, text: str) -> dict[str, Any]:
    """A message or reasoning item completed with its one content part of
    ``text``, returned."""
    part = _part(kind, text)
    item["content"] = [part]
    return part


def _part(kind: Kind | Literal["summary"], text: str) -> dict[str, Any]:
    if kind == "text":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    if kind == "summary":
        return {"type": "summary_text", "text": text}
    return {"type": "reasoning_text", "text": text}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
