"""Native tool calls as backends send them, made strict.

Upstream servers get the details wrong in known ways: a missing ``index``, the
name repeated on every delta, two calls merged under one index, arguments as
an object or as sloppy JSON, empty ids, short names for namespaced tools.
:class:`NativeStream` takes streamed deltas in any of those shapes and turns
them into the parsing core's call events as they arrive, under the streaming
rules (no interleaving, id and name once, strict JSON arguments);
:func:`message_calls` does the same for a finished message.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
from mypy_extensions import mypyc_attr

from toolrelay.events import CallRejected, Event, RejectedCall, ToolCall
from toolrelay.flatjson import FlatObject
from toolrelay.formats.base import ArgumentStream, Call, Context
from toolrelay.io.ids import unique_hex
from toolrelay.names import ToolSet
from toolrelay.repair import json_text, repair_json


def new_call_id() -> str:
    return "call_" + unique_hex()


NOT_AN_OBJECT = "the arguments are not a JSON object"


def make_call(call_id: Any, name: Any, arguments: Any, tools: ToolSet) -> ToolCall | RejectedCall:
    """A strict call from upstream parts, or why it cannot be used (a name that
    is not one declared tool, arguments that are not an object)."""
    raw_name = name if isinstance(name, str) else None
    resolved = tools.resolve(raw_name) if raw_name else None
    if resolved is None:
        return RejectedCall(
            raw_name, _written(raw_name, arguments), tools.unresolved(raw_name or "")
        )
    args = _arguments(arguments)
    if args is None:
        return RejectedCall(raw_name, _written(raw_name, arguments), NOT_AN_OBJECT)
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
        name=resolved,
        arguments=args,
        # Repaired arguments may hold what orjson refuses to write (an integer
        # beyond 64 bits, a lone surrogate); json_text writes those too.
        arguments_json=json_text(args),
    )


def _arguments(raw: Any) -> dict[str, Any] | None:
    """The arguments object upstream sent; None when what it sent is not one."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = repair_json(raw)
    # Some servers double-encode: a JSON string holding the object.
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def _written(name: str | None, arguments: Any) -> str:
    """A call as upstream sent it, for the model to be shown its attempt."""
    return json_text({"name": name, "arguments": arguments})


class _Slot:
    """One upstream call: how later deltas find it, and its call as it streams."""

    __slots__ = (
        "call",
        "ended",
        "fed",
        "gathered",
        "id",
        "name",
        "pending",
        "queued",
        "raw",
        "reader",
        "received",
    )

    def __init__(self, ctx: Context, call_id: str | None, name: str | None, flat: bool) -> None:
        self.id = call_id
        self.name = name  # as upstream wrote it, for matching later deltas
        self.call = Call(ctx)
        self.call.native_id = call_id
        self.received = False
        self.ended = False
        # Argument fragments (or a whole object) waiting for this call's turn.
        self.queued: list[str | dict[str, Any]] = []
        self.pending = ""  # the start of a token a fragment ended in
        # Arguments that are not a JSON object (a double-encoded string, ...):
        # kept whole and read once the stream is over.
        self.raw: list[str] | None = None
        # What reads the arguments: while they are a flat object, a FlatObject (its
        # fragments kept in ``fed``); the lenient reader, which reads them all again
        # (``NativeStream._stream``), once they turn out to be anything else.
        self.reader: FlatObject | ArgumentStream = (
            FlatObject() if flat else ArgumentStream(self.call)
        )
        self.fed: list[str] = []
        # The FlatObject's output for the fragments of a held call, handed to the call
        # as one piece when it ends or the lenient reader takes over (``_flush``).
        self.gathered: list[str] = []


# Compiled (setup.py), and tests read with a subclass that takes the general path.
@mypyc_attr(allow_interpreted_subclasses=True)
class NativeStream:
    """``delta.tool_calls`` entries in, strict call events out as they arrive.

    One call streams at a time, in the order upstream opened them, so that the
    client never sees interleaved indices; deltas for a later call wait until
    the one before it is complete (its arguments object closed) or the stream
    ends. Each argument fragment is relayed as soon as it is read, made strict
    JSON on the way (a fragment holding only an object key goes out with its
    value's first fragment); arguments that are not an object at all are read
    whole when the stream ends.

    ``held``: the calls are held until they are whole (the checked stage's
    ``CallHold``, validation on), which releases each as its start, one delta of
    its ``arguments_json`` and its end. A fragment read by the ``FlatObject`` then
    makes no event: what it reads is gathered and goes out as one argument delta
    just before the call's end (or before the lenient reader's first output, when
    the arguments turn out not to be a flat object), so the concatenated deltas
    are the same text, in fewer pieces, and a read of the call's middle fragments
    gives nothing to pass on.
    """

    # Fragments of a flat object are read by FlatObject (the tests compare with False).
    flat_fragments: ClassVar[bool] = True
    # A call's first delta (its id and name) opens its slot in :meth:`_opened`, and its
    # first fragment opens the call in :meth:`fragment`, without the general reading of
    # an entry and the queue's advance (the tests compare with False).
    open_in_one_step: ClassVar[bool] = True

    def __init__(self, tools: ToolSet, *, held: bool = False) -> None:
        self._ctx = Context(tools)
        self._held = held
        self._slots: list[_Slot] = []
        self._active = 0  # the first slot not yet ended
        # Upstream index -> our slot: a new id under a used index gets a new slot.
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._slots)

    def feed(self, entries: Any) -> list[Event]:
        if type(entries) is list and len(entries) == 1:
            bare = _bare_fragment(entries[0])
            if bare is not None:  # most of a call's deltas: its next argument fragment
                # (Its two values passed by themselves: a call with ``*bare`` is made
                # through the method's Python wrapper.)
                events = self.fragment(bare[0], bare[1])
                if events is not None:
                    return events
            elif self.open_in_one_step and self._opened(entries[0]):
                return []  # a call's first delta: its id and name, nothing to say yet
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, dict):
                    self._feed_one(entry)
            self._move_on()
        return self._drain()

    def fragment(self, index: int, text: str) -> list[Event] | None:
        """What :meth:`feed` gives for ``[{"index": index, "function": {"arguments":
        text}}]`` (``text`` not empty) when that is the next argument fragment of the
        call streaming now, or the first one that opens its object once its name has
        come, read by its ``FlatObject``; None when it is not (feed the entry
        whole). What :meth:`_feed_one` and :meth:`_advance`
        would find, without their checks (the tests compare with the lenient
        reader, which never comes here)."""
        if self._by_index.get(index) != self._active:
            return None
        slot = self._slots[self._active]
        # (The active call never ended (each feed moves on past one that did), and
        # once it started it has no queue: its fragments go straight to its reader.)
        if type(slot.reader) is not FlatObject:
            return None
        call = slot.call
        if not call.started:
            # Its first fragment: the call opens in one step when its name came
            # (resolved as it came) and nothing of it waits, as _advance opens it.
            if (
                not self.open_in_one_step
                or slot.queued
                or call.name is None  # (also when the name is not declared: dropped)
                or not text.lstrip().startswith("{")
            ):
                return None
            call.start()
        slot.received = True
        self._take(slot, text)
        if slot.ended or slot.call.dropped:  # else there is nothing to move on to
            self._move_on()
        return self._drain()

    def _opened(self, entry: Any) -> bool:
        """Whether ``entry`` opened a call in one step: an entry that names a call under
        an index not seen before (its id too, or none; no arguments yet) when every
        call before it has ended, so that it is the call streaming now. Its slot is
        opened and its name resolved (a name not declared ends it at once), as
        :meth:`_feed_one` and :meth:`_advance` would do it; False (nothing done) for
        any other entry (feed it whole)."""
        if type(entry) is not dict:
            return False
        function = entry.get("function")
        if type(function) is not dict:
            return False
        index = entry.get("index")
        name = function.get("name")
        call_id = entry.get("id")
        if (
            type(index) is not int
            or type(name) is not str
            or not name
            or function.get("arguments") not in (None, "")
            or (call_id is not None and type(call_id) is not str)
            or index in self._by_index
            or self._active != len(self._slots)
        ):
            return False
        slot = self._open(index, call_id or None, name)
        if not slot.call.set_name(name):
            slot.ended = True  # not a declared tool: no call (rejected at the close)
            self._active += 1
        return True

    def _move_on(self) -> None:
        """Past the active call once it ended; then stream what waits."""
        if self._active < len(self._slots) and self._slots[self._active].ended:
            self._active += 1
        self._advance(final=False)

    def close(self) -> list[Event]:
        """The calls still open, completed as they stand, and the calls that
        could not be used, as ``CallRejected``."""
        self._advance(final=True)
        for slot in self._slots:
            if not slot.call.started:  # ended without ever being a call
                self._ctx.events.append(CallRejected(self._rejection(slot)))
        return self._drain()

    def _rejection(self, slot: _Slot) -> RejectedCall:
        parts = [part if isinstance(part, str) else json_text(part) for part in slot.queued]
        arguments: Any = "".join(parts)
        reason = slot.call.rejection or self._ctx.tools.unresolved(slot.name or "")
        return RejectedCall(slot.name, _written(slot.name, arguments), reason)

    def _drain(self) -> list[Event]:
        events = self._ctx.events
        self._ctx.events = []
        return events

    def _feed_one(self, entry: dict[str, Any]) -> None:
        function = entry.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id = entry.get("id") if isinstance(entry.get("id"), str) and entry.get("id") else None
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        index = entry.get("index") if isinstance(entry.get("index"), int) else None
        slot = self._slot_for(index, call_id, name, isinstance(arguments, dict))
        if slot is None:
            slot = self._open(index, call_id, name)
        elif name and not slot.name:
            slot.name = name  # later repeats of the name are ignored, never appended
        if isinstance(arguments, dict) or (isinstance(arguments, str) and arguments):
            slot.received = True
            if slot.call.started and not slot.queued:
                self._take(slot, arguments)  # the call streaming now: no queue
            else:
                slot.queued.append(arguments)

    def _slot_for(
        self, index: int | None, call_id: str | None, name: str | None, whole: bool
    ) -> _Slot | None:
        """The call this entry continues; None when it starts a new one."""
        if index is not None:
            position = self._by_index.get(index)
            if position is None:
                if call_id is not None or name or not self._slots:
                    return None  # a new index with an id or a name: a new call
                # Bare arguments under an index not seen before: the last call's.
                position = len(self._slots) - 1
                self._by_index[index] = position
        elif call_id is not None:
            position = self._by_id.get(call_id)
            if position is None:
                return None
        elif self._slots:
            position = len(self._slots) - 1  # a continuation that lost its index
        else:
            return None
        slot = self._slots[position]
        if call_id is not None and slot.id is not None and slot.id != call_id:
            return None  # a second call merged under an index already in use
        if name and slot.name and name != slot.name:
            return None  # another call's name: a new call, whatever the index says
        if whole and slot.received:
            return None  # complete arguments again: a new call
        if call_id is not None and slot.id is None:
            slot.id = call_id
            slot.call.native_id = call_id
            self._by_id[call_id] = position
        return slot

    def _open(self, index: int | None, call_id: str | None, name: str | None) -> _Slot:
        slot = _Slot(self._ctx, call_id, name, self.flat_fragments)
        position = len(self._slots)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = position
        if call_id is not None:
            self._by_id[call_id] = position
        return slot

    def _advance(self, *, final: bool) -> None:
        """Stream the active call's queued fragments; move on as calls complete."""
        while self._active < len(self._slots):
            slot = self._slots[self._active]
            call = slot.call
            if slot.name is None and not final:
                return  # its name has not come yet
            if call.name is None and not call.dropped and slot.name is not None:
                call.set_name(slot.name)
            if call.dropped or call.name is None:
                slot.ended = True  # not a declared tool, or never named: no call
            elif not call.started and not _opens_object(slot.queued):
                if not final:
                    return  # no arguments yet, or not an object: read whole at the end
                self._finish_whole(slot)
            else:
                call.start()
                queued, slot.queued = slot.queued, []
                for fragment in queued:
                    if slot.ended:
                        break  # what follows a complete object is not this call's
                    self._take(slot, fragment)
                if final and not slot.ended:
                    self._finish(slot)
            if not slot.ended:
                return
            self._active += 1

    def _take(self, slot: _Slot, fragment: str | dict[str, Any]) -> None:
        if slot.ended:
            return  # what follows a complete object is not this call's
        flat = slot.reader
        if type(flat) is FlatObject and type(fragment) is str:
            text = flat.feed(fragment)
            if text is not None:
                slot.fed.append(fragment)
                if self._held:
                    slot.gathered.append(text)
                else:
                    slot.call.arguments(text)
                if flat.done:
                    self._end(slot)
                return
        stream = self._stream(slot)
        if isinstance(fragment, dict):
            if not stream.started and slot.raw is None:
                slot.call.arguments(json_text(fragment))
                self._end(slot)
            return
        if slot.raw is not None:
            slot.raw.append(fragment)
            return
        buf = slot.pending + fragment
        pos, other = stream.feed(buf, 0, False)
        if other is not None and not stream.started:
            slot.raw = [buf]  # not an object: read whole at the end
            return
        slot.pending = buf[pos:]
        if stream.done:
            self._end(slot)
        elif other is not None:
            # Something that is not JSON inside the object: it ends here.
            stream.finish()
            self._end(slot)

    @staticmethod
    def _stream(slot: _Slot) -> ArgumentStream:
        """The slot's lenient reader; made when the arguments turn out not to be a flat
        object, it reads what the FlatObject read (that output already went out)."""
        reader = slot.reader
        if isinstance(reader, ArgumentStream):
            return reader
        NativeStream._flush(slot)  # what the FlatObject read goes out first, as it would have
        stream = slot.reader = ArgumentStream(slot.call)
        stream.muted = True
        for fragment in slot.fed:
            buf = slot.pending + fragment
            pos, _ = stream.feed(buf, 0, False)
            slot.pending = buf[pos:]
        stream.muted = False
        slot.fed = []
        return stream

    def _finish_whole(self, slot: _Slot) -> None:
        """A call whose arguments did not open an object: none at all ({}), a
        double-encoded object, or no object (the call is rejected)."""
        text = "".join(part for part in slot.queued if isinstance(part, str))
        arguments = _arguments(text)
        if arguments is None:
            slot.call.reject(NOT_AN_OBJECT)
            slot.ended = True
            return
        slot.queued = []
        slot.call.start()
        slot.call.arguments(json_text(arguments))
        self._end(slot)

    def _finish(self, slot: _Slot) -> None:
        stream = self._stream(slot)
        if slot.raw is None and slot.pending:
            _, other = stream.feed(slot.pending, 0, True)
            if other is not None and not stream.started:
                slot.raw = [slot.pending]
        if slot.raw is not None:
            # Begun as an object, then not one: what streamed stands.
            slot.call.arguments(json_text(_arguments("".join(slot.raw)) or {}))
        else:
            stream.finish()
        self._end(slot)

    def _end(self, slot: _Slot) -> None:
        self._flush(slot)
        slot.call.end()
        slot.ended = True

    @staticmethod
    def _flush(slot: _Slot) -> None:
        """A held call's gathered arguments handed to the call, as one delta."""
        if slot.gathered:
            slot.call.arguments("".join(slot.gathered))
            slot.gathered = []


def message_calls(
    message: dict[str, Any], tools: ToolSet
) -> tuple[list[ToolCall], list[RejectedCall]]:
    """The strict calls of a non-streamed ``message.tool_calls`` array, and the
    calls that cannot be used."""
    raw = message.get("tool_calls")
    if not isinstance(raw, list):
        return [], []
    out = []
    rejected = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        function = entry.get("function")
        if not isinstance(function, dict):
            continue
        call = make_call(entry.get("id"), function.get("name"), function.get("arguments"), tools)
        if isinstance(call, ToolCall):
            out.append(call)
        else:
            rejected.append(call)
    return _distinct_ids(out), rejected


def _distinct_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Calls whose ids are unique in the reply: tool results are matched by id."""
    seen: set[str] = set()
    out = []
    for call in calls:
        if call.id in seen:
            call = ToolCall(new_call_id(), call.name, call.arguments, call.arguments_json)
        seen.add(call.id)
        out.append(call)
    return out


def _bare_fragment(entry: Any) -> tuple[int, str] | None:
    """The index and argument fragment of an entry that carries nothing else (no
    id, no name), its fragment not empty; None for any other entry."""
    if type(entry) is not dict:
        return None
    function = entry.get("function")
    if (
        type(function) is not dict
        or entry.get("id") is not None
        or function.get("name") is not None
    ):
        return None
    arguments = function.get("arguments")
    index = entry.get("index")
    if type(arguments) is not str or not arguments or type(index) is not int:
        return None
    return index, arguments


def _opens_object(queued: list[str | dict[str, Any]]) -> bool:
    """Whether a call's first arguments open a JSON object (so they may stream)."""
    for part in queued:
        if isinstance(part, dict):
            return True
        text = part.lstrip()
        if text:
            return text[0] == "{"
    return False
