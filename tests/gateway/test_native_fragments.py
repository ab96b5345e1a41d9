"""A native call's argument fragments read by ``FlatObject`` (the fast path) give
exactly the events the lenient reader gives, for every text and every fragmenting:
strict, spaced, sloppy, cut, escaped, nested, duplicate keys, big numbers."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.events import Event, ToolCallEnd, ToolCallStart
from toolrelay.flatjson import FlatObject
from toolrelay.io.backends.native import NativeStream
from toolrelay.names import ToolSet
from toolrelay.repair import json_text

TOOLS = ToolSet([{"type": "function", "function": {"name": "get_weather"}}])


class _Lenient(NativeStream):
    flat_fragments = False


def _events(native: NativeStream, calls: list[tuple[str, list[int]]]) -> list[Event]:
    events: list[Event] = []
    for index, (text, cuts) in enumerate(calls):
        start = {"index": index, "id": f"call_{index}", "type": "function"}
        start["function"] = {"name": "get_weather", "arguments": ""}
        events += native.feed([start])
        for fragment in _pieces(text, cuts):
            events += native.feed([{"index": index, "function": {"arguments": fragment}}])
    return events + native.close()


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({int(cut) % (len(text) + 1) for cut in cuts} - {0, len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _same(calls: list[tuple[str, list[int]]]) -> None:
    fast = _events(NativeStream(TOOLS), calls)
    assert fast == _events(_Lenient(TOOLS), calls)


_STRINGS = st.text(st.sampled_from([*'ab é"\\/\n\t\x01\u2028{}[]:,', "\ud800", "😀"]), max_size=8)
_SCALARS = st.one_of(
    _STRINGS,
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
_VALUES = json_trees(
    _SCALARS,
    _STRINGS,
    leaves=6,
)


def _written(value: dict[str, Any], style: int) -> str:
    """The object as some backend writes it."""
    if style == 0:
        return json_text(value)  # as orjson writes it (json where orjson refuses)
    if style == 1:
        return json.dumps(value)  # spaces, \\u escapes
    if style == 2:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if style == 3:
        return json.dumps(value, indent=1)
    return repr(value)  # Python: single quotes, True, None


@settings(max_examples=400)
@given(
    value=st.dictionaries(_STRINGS, _VALUES, max_size=4),
    style=st.integers(0, 4),
    cut=st.one_of(st.none(), st.integers(0, 200)),
    extra=st.sampled_from(["", ',"a":1', '"', " junk", "}", ', "a": 1, "a": 2']),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_written_objects_stream_as_the_lenient_reader_streams_them(
    value: dict[str, Any], style: int, cut: int | None, extra: str, cuts: list[int]
) -> None:
    text = _written(value, style)
    if extra and text.endswith("}"):
        text = text[:-1] + extra + ("}" if extra != "}" else "")
    if cut is not None:
        text = text[:cut]
    _same([(text, cuts)])


_SOUP = st.lists(
    st.sampled_from([*list("{}[]:,\"\\ \n'abtrueflsn0123456789.-+eEu"), '"k"', '"v"', "\\u00e9"]),
    max_size=30,
).map("".join)


@settings(max_examples=400)
@given(first=_SOUP, second=_SOUP, cuts=st.lists(st.integers(0, 60), max_size=12))
def test_any_text_streams_as_the_lenient_reader_streams_it(
    first: str, second: str, cuts: list[int]
) -> None:
    _same([("{" + first, cuts), (second, cuts)])


# Members, right and wrong: trailing and doubled commas, keys without values, ...
_MEMBERS = st.lists(
    st.sampled_from(["{", "}", ",", ":", " ", '"k"', '"v"', "1", "-0", "true", "[", '"', "\\"]),
    max_size=16,
).map("".join)


@settings(max_examples=400)
@given(members=_MEMBERS, cuts=st.lists(st.integers(0, 40), max_size=8))
def test_members_right_and_wrong_stream_as_the_lenient_reader_streams_them(
    members: str, cuts: list[int]
) -> None:
    _same([("{" + members, cuts)])


@settings(max_examples=200)
@given(
    digits=st.integers(1, 5000),
    key=st.sampled_from(['"n"', '"n" ', "n"]),
    cuts=st.lists(st.integers(0, 6000), max_size=6),
)
def test_long_numbers_stream_as_the_lenient_reader_streams_them(
    digits: int, key: str, cuts: list[int]
) -> None:
    _same([("{" + key + ":" + "7" * digits + "}", cuts)])


EDGES = [
    '{"city":"Paris"}',
    '{"city": "Paris", "days": 3, "metric": true, "note": null}',
    '{"a":1,}',
    '{"a":"v", }',
    '{"a":1,,"b":2}',
    "{,}",
    '{"a"}',
    '{"a":}',
    '{"a" "b"}',
    '{"a":1 "b":2}',
    '{"a":"x\\"y\\\\z\\n\\t\\b\\f\\r"}',
    '{"a\\"b":"\\/\\u00e9\\ud83d\\ude00\\ud800"}',
    '{"a":-0,"b":01,"c":1.50,"d":1e2,"e":-1.5e-7,"f":+1}',
    '{"a":True,"b":None,"c":NaN,"d":Infinity,"e":word}',
    '{"a":1,"a":2}',
    '{"n":123456789012345678901234567890}',
    '{"a":{"b":[1,{"c":2}]},"d":3}',
    '{"a":[],"b":{}}',
    "{'a': 'b'}",
    '{"a":"b"} trailing',
    '{"a":"b"}{"c":1}',
    '  {"a":"b"}',
    '{"a":"b\x01c"}',
    '{"a":"unterminated',
    '{"a":12',
    '{"a',
    "{",
    "{}",
    "[1, 2]",
    '"{\\"a\\": 1}"',
]


@pytest.mark.parametrize("text", EDGES)
def test_edges_cut_anywhere_stream_as_the_lenient_reader_streams_them(text: str) -> None:
    _same([(text, list(range(len(text) + 1)))])  # a character a fragment
    for cut in range(len(text) + 1):
        _same([(text, [cut])])


def test_a_flat_object_is_read_without_the_lenient_reader() -> None:
    flat = FlatObject()
    out = [flat.feed(part) for part in ['{"ci', 'ty":', '"Par', 'is", "n": -1', "2.5}"]]
    assert out == ["{", "", '"city":"Par', 'is"', ',"n":-12.5}']
    assert flat.done


def test_what_the_writer_would_rewrite_is_left_to_it() -> None:
    for text in ['{"a": {"b": 1}}', '{"a": "\\u00e9"}', "{'a': 1}", '{"a": 1e5}', '{"a": True}']:
        flat = FlatObject()
        assert any(flat.feed(part) is None for part in (text[:4], text[4:])), text


# Entries as servers send them: the index kept, lost, a bool; the id and name once,
# repeated, or another call's; a "type" key; arguments whole, empty or in fragments;
# several calls in one list. A continuation read at once (NativeStream._continued)
# must give what the general path gives (the lenient reader never takes it).
_TWO_TOOLS = ToolSet(
    [
        {"type": "function", "function": {"name": "get_weather"}},
        {"type": "function", "function": {"name": "get_time"}},
    ]
)
_INDEX = st.sampled_from([0, 1, None, True, "0"])
_ID = st.sampled_from([None, "", "call_a", "call_b"])
_NAME = st.sampled_from([None, "", "get_weather", "get_time", "unknown"])
_ARGUMENTS = st.one_of(
    st.sampled_from(['{"ci', 'ty":', '"Par', 'is"}', '{"a":1}', "}", "", " ", '"x"', "null"]),
    st.none(),
    st.just({"a": 1}),
)


def _put(draw: st.DrawFn, into: dict[str, Any], key: str, values: st.SearchStrategy[Any]) -> None:
    """``key`` set to a drawn value; a drawn None is sometimes left out, sometimes written."""
    value = draw(values)
    if value is not None or draw(st.booleans()):
        into[key] = value


@st.composite
def _entry(draw: st.DrawFn) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    _put(draw, entry, "index", _INDEX)
    _put(draw, entry, "id", _ID)
    if draw(st.booleans()):
        entry["type"] = "function"
    function: dict[str, Any] = {}
    _put(draw, function, "name", _NAME)
    _put(draw, function, "arguments", _ARGUMENTS)
    if function or draw(st.booleans()):
        entry["function"] = function
    return entry


def _fragment_entry(index: int, fragment: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": fragment}}


_ABSENT = object()


@st.composite
def _continuation(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A call's next fragment, now and then with something more: an id, a name, a
    ``type``, another index (what decides whether it continues the call)."""
    entry = _fragment_entry(
        draw(st.sampled_from([0, 0, 0, 1, True])),
        draw(st.sampled_from(['{"ci', 'ty":', '"Par', 'is"}', 'ty":1}', '{"a":1}', "}", ""])),
    )
    for key, where, values in (
        ("id", entry, [_ABSENT, _ABSENT, None, "", "call_a", "call_b"]),
        ("name", entry["function"], [_ABSENT, _ABSENT, None, "", "get_weather", "get_time"]),
        ("type", entry, [_ABSENT, "function"]),
    ):
        value = draw(st.sampled_from(values))
        if value is not _ABSENT:
            where[key] = value
    return [entry]


# A call that began streaming (its start, its object opened), then mostly its fragments,
# with any entry between.
_STARTED = [
    [{"index": 0, "id": "call_a", "function": {"name": "get_weather", "arguments": ""}}],
    [_fragment_entry(0, '{"ci')],
]
_SECOND = [{"index": 1, "id": "call_b", "function": {"name": "get_time", "arguments": "{"}}]
_FEEDS = st.lists(
    st.one_of(
        _continuation(),
        _continuation(),
        st.just(_SECOND),
        st.lists(_entry(), min_size=1, max_size=3),
    ),
    max_size=12,
).map(lambda feeds: [*_STARTED, *feeds])


@settings(max_examples=600)
@given(feeds=_FEEDS)
def test_any_entries_give_the_events_of_the_general_path(feeds: list[list[Any]]) -> None:
    def events(native: NativeStream) -> list[list[Event]]:
        """Each feed's events (what goes out when), the close's last."""
        out = [native.feed(entries) for entries in feeds] + [native.close()]
        numbered = _numbered([event for events in out for event in events])
        return [[numbered.pop(0) for _ in events] for events in out]

    assert events(NativeStream(_TWO_TOOLS)) == events(_Lenient(_TWO_TOOLS))


def _numbered(events: list[Event]) -> list[Event]:
    """The events with each id replaced by its order of appearance (an id of ours is
    random: a call without one gets a fresh one in each stream)."""
    ids: dict[str, str] = {}
    out: list[Event] = []
    for event in events:
        if isinstance(event, ToolCallStart):
            event = replace(event, id=ids.setdefault(event.id, f"id{len(ids)}"))
        elif isinstance(event, ToolCallEnd):
            call = replace(event.call, id=ids.setdefault(event.call.id, f"id{len(ids)}"))
            event = replace(event, call=call)
        out.append(event)
    return out


def test_a_call_streams_its_fragments_as_they_come() -> None:
    native = NativeStream(_TWO_TOOLS)
    start = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
    assert native.feed([start]) == []
    out = [native.feed([_fragment_entry(0, part)]) for part in ['{"ci', 'ty":', '"Par', 'is"}']]
    assert [len(events) for events in out] == [2, 0, 1, 2]  # start and "{"; the key held; end
