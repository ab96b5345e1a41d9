"""Native tool calls as backends send them, made strict.

Upstream servers get the details wrong in known ways: a missing ``index``, the
name repeated on every delta, two calls merged under one index, arguments as
an object or as sloppy JSON, empty ids, short names for namespaced tools. The
collector takes the deltas in any of those shapes and gives back clean
:class:`~toolrelay.events.ToolCall` values once the round is over, so that the
gateway can emit them under the streaming rules (no interleaving, name once).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from toolrelay.events import ToolCall
from toolrelay.names import ToolSet
from toolrelay.repair import json_text, repair_json


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def make_call(call_id: Any, name: Any, arguments: Any, tools: ToolSet) -> ToolCall | None:
    """A strict call from upstream parts; None when the name is not a declared tool."""
    if not isinstance(name, str):
        return None
    resolved = tools.resolve(name)
    if resolved is None:
        return None
    args = _arguments(arguments)
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
        name=resolved,
        arguments=args,
        # Repaired arguments may hold what orjson refuses to write (an integer
        # beyond 64 bits, a lone surrogate); json_text writes those too.
        arguments_json=json_text(args),
    )


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = repair_json(raw)
    # Some servers double-encode: a JSON string holding the object.
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


class _Slot:
    __slots__ = ("arguments", "id", "name")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []


class NativeCalls:
    """Accumulates ``delta.tool_calls`` entries across a stream."""

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        # Upstream index -> our slot: a new id under a used index gets a new slot.
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self._slots)

    def feed(self, entries: Any) -> None:
        if not isinstance(entries, list):
            return
        for entry in entries:
            if isinstance(entry, dict):
                self._feed_one(entry)

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
        if isinstance(arguments, dict):
            slot.arguments = [orjson.dumps(arguments).decode()]
        elif isinstance(arguments, str):
            slot.arguments.append(arguments)

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
        if whole and slot.arguments:
            return None  # complete arguments again: a new call
        if call_id is not None and slot.id is None:
            slot.id = call_id
            self._by_id[call_id] = position
        return slot

    def _open(self, index: int | None, call_id: str | None, name: str | None) -> _Slot:
        slot = _Slot(call_id, name)
        position = len(self._slots)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = position
        if call_id is not None:
            self._by_id[call_id] = position
        return slot

    def calls(self, tools: ToolSet) -> list[ToolCall]:
        calls = (make_call(s.id, s.name, "".join(s.arguments), tools) for s in self._slots)
        return _distinct_ids([call for call in calls if call is not None])


def message_calls(message: dict[str, Any], tools: ToolSet) -> list[ToolCall]:
    """The strict calls of a non-streamed ``message.tool_calls`` array."""
    raw = message.get("tool_calls")
    if not isinstance(raw, list):
        return []
    out = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        function = entry.get("function")
        if not isinstance(function, dict):
            continue
        call = make_call(entry.get("id"), function.get("name"), function.get("arguments"), tools)
        if call is not None:
            out.append(call)
    return _distinct_ids(out)


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
