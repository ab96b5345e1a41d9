"""A native call opened in one step (``NativeStream._opened``: its first delta, the id
and name under a new index; ``NativeStream.fragment``: its first argument
fragment, once its name has come) against the general reading of an entry and
the queue's advance (``open_in_one_step`` off), event for event and feed for
feed: calls whose id and name come in one entry or over several, fragments cut
anywhere from objects flat or not (escapes, characters beyond ASCII, numbers,
sloppy text, whitespace before the brace), several calls with indices in any
order, names not declared, and any entry between."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.events import Event
from toolrelay.io.backends.native import NativeStream
from toolrelay.names import ToolSet

TOOLS = ToolSet(
    [
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "function", "function": {"name": "get_time"}},
    ]
)


class _General(NativeStream):
    open_in_one_step = False


_STRINGS = st.text(st.sampled_from([*'ab é"\\/\n\t\x01{}[]:,', "😀", "\ud800"]), max_size=6)
_VALUES = st.one_of(
    _STRINGS,
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 9), max_size=2),
)
_OBJECTS = st.dictionaries(_STRINGS, _VALUES, max_size=3)


@st.composite
def _arguments(draw: st.DrawFn) -> str:
    """An arguments text: an object as a writer would write it, now and then spaced,
    sloppy, cut short or not an object at all."""
    text = json.dumps(draw(_OBJECTS), ensure_ascii=draw(st.booleans()))
    text = draw(
        st.sampled_from(
            [
                text,
                text,
                " " + text,
                text.replace(":", ": "),
                text[: max(1, len(text) // 2)],
                text + "}",
                "{'a': 1}",
                '"{\\"a\\": 1}"',
                "  ",
                "[1]",
            ]
        )
    )
    return text


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({cut % (len(text) + 1) for cut in cuts} - {0, len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@st.composite
def _call(draw: st.DrawFn, index: int) -> list[list[dict[str, Any]]]:
    """One call's feeds: its opening (id and name together, or over two entries, or
    the name before the id), then its argument fragments."""
    call_id = draw(st.sampled_from([f"call_{index}", None, ""]))
    name = draw(st.sampled_from(["get_weather", "get_weather", "get_time", "unknown"]))
    first: dict[str, Any] = {"index": index, "type": "function", "function": {"name": name}}
    if call_id is not None:
        first["id"] = call_id
    if draw(st.booleans()):
        first["function"]["arguments"] = ""
    opening = [[first]]
    if draw(st.booleans()):  # the id and the name split over two entries
        name_entry = {"index": index, "function": {"name": name}}
        id_entry: dict[str, Any] = {"index": index, "id": call_id or f"call_{index}"}
        opening = [[id_entry], [name_entry]] if draw(st.booleans()) else [[name_entry]]
    text = draw(_arguments())
    cuts = draw(st.lists(st.integers(0, 200), max_size=8))
    fragments = [
        [{"index": index, "function": {"arguments": piece}}] for piece in _pieces(text, cuts)
    ]
    return [*opening, *fragments]


_STRAY = st.sampled_from(
    [
        [{"index": 0, "function": {"arguments": "}"}}],
        [{"index": 1, "function": {"arguments": '{"a":1}'}}],
        [{"index": 7, "function": {"arguments": "{"}}],
        [{"index": 0, "id": "call_x", "function": {"name": "get_time"}}],
        [],
        [{}],
    ]
)


@st.composite
def _streams(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Several calls, each under its own index (in any order), their feeds one after
    the other or interleaved, now and then a stray entry between."""
    indices = draw(st.permutations([0, 1, 2]))[: draw(st.integers(1, 3))]
    calls = [draw(_call(index)) for index in indices]
    feeds: list[list[dict[str, Any]]] = []
    if draw(st.booleans()):
        for call in calls:
            feeds += call
    else:  # interleaved: each next feed from a call drawn
        queues = [list(call) for call in calls]
        while any(queues):
            queue = draw(st.sampled_from([queue for queue in queues if queue]))
            feeds.append(queue.pop(0))
    for _ in range(draw(st.integers(0, 2))):
        feeds.insert(draw(st.integers(0, len(feeds))), draw(_STRAY))
    return feeds


def _run(native: NativeStream, feeds: list[list[dict[str, Any]]]) -> list[list[Event]]:
    """Each feed's events, the close's last; ids of ours (random) numbered by appearance."""
    out = [native.feed(entries) for entries in feeds] + [native.close()]
    ids: dict[str, str] = {}
    return [[_numbered(event, ids) for event in events] for events in out]


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields (a compiled one has no ``__dict__``)."""
    return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}


def _numbered(event: Event, ids: dict[str, str]) -> Any:
    fields = _fields(event)
    for key in ("id",):
        if key in fields:
            fields[key] = ids.setdefault(fields[key], f"id{len(ids)}")
    call = fields.get("call")
    if call is not None and hasattr(call, "id"):
        fields["call"] = {**_fields(call), "id": ids.setdefault(call.id, f"id{len(ids)}")}
    return type(event).__name__, fields


@settings(max_examples=800)
@given(feeds=_streams())
def test_a_call_opened_in_one_step_gives_the_events_of_the_general_path(
    feeds: list[list[dict[str, Any]]],
) -> None:
    assert _run(NativeStream(TOOLS), feeds) == _run(_General(TOOLS), feeds)


def test_the_first_fragment_opens_the_call_in_one_step() -> None:
    native = NativeStream(TOOLS)
    opening = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
    assert native.feed([opening]) == []
    events = native.fragment(0, '{"ci')
    assert events is not None
    assert [type(event).__name__ for event in events] == ["ToolCallStart", "ToolCallArgumentsDelta"]


def test_a_first_fragment_that_opens_no_object_is_left_to_the_general_path() -> None:
    native = NativeStream(TOOLS)
    native.feed([{"index": 0, "id": "call_1", "function": {"name": "get_weather"}}])
    assert native.fragment(0, "  ") is None
    assert native.fragment(0, '"{\\"a') is None
