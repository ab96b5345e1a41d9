"""The Messages and Responses encoders' fast path for more text in an open block
(``Blocks.stream_event``: the usual text said as it came, held blanks through
``_more_text``) writes exactly what the general path (the builder's events, each
through ``sse``) writes, event for event, whatever the text, its blanks and what
comes between, and leaves the same message or response behind."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.segments import events_of
from tests.strategies import json_trees
from toolrelay.events import ContentDelta, Event
from toolrelay.server.anthropic.wire import MessageEncoder
from toolrelay.server.blocks import Blocks, sse
from toolrelay.server.responses.wire import ResponseBuilder

# Text heavy in the blanks the builder holds back (those ``isspace`` names
# beyond ASCII too, which the fast path's test of the last character must
# see as ``rstrip`` does) and in what JSON escapes.
TEXT = st.text(
    alphabet=st.sampled_from(list(' \n\t\r"\\aé\u2028\x01{}\x1c\x85\xa0\u3000\u200b'))
    | st.characters(exclude_categories=("Cs",)),
    max_size=12,
)
PLAN = st.lists(
    st.one_of(
        st.tuples(st.just("text"), TEXT),
        st.tuples(st.just("reasoning"), TEXT),
        st.tuples(
            st.just("call"), st.dictionaries(st.text(max_size=3), st.text(max_size=5), max_size=2)
        ),
    ),
    max_size=6,
)


def _general(builder: Blocks, event: Event) -> bytes | None:
    events = builder.event(event)
    return b"".join(map(sse, events)) if events else None


def _events(plan: list[Any], cuts: list[int], extra: list[str]) -> list[Event]:
    # Text chunks one after another too, as a stream of content brings them.
    return [*events_of(plan, cuts), *(ContentDelta(text) for text in extra)]


@settings(max_examples=400, deadline=None)
@given(PLAN, st.lists(st.integers(0, 40), max_size=6), st.lists(TEXT, max_size=6), st.booleans())
def test_messages_text_deltas_are_the_general_bytes(
    plan: list[Any], cuts: list[int], extra: list[str], thinking: bool
) -> None:
    fast = MessageEncoder("m", thinking)
    general = MessageEncoder("m", thinking).builder
    for event in _events(plan, cuts, extra):
        assert fast.event(event) == _general(general, event)
    # The last block closed too: its whole text is the pieces kept.
    assert fast.builder.end_block() == general.end_block()
    # (A call's input is an orjson.Fragment: compared as JSON.)
    assert orjson.dumps(fast.builder.message["content"]) == orjson.dumps(general.message["content"])


@settings(max_examples=400, deadline=None)
@given(PLAN, st.lists(st.integers(0, 40), max_size=6), st.lists(TEXT, max_size=6), st.booleans())
def test_responses_text_deltas_are_the_general_bytes(
    plan: list[Any], cuts: list[int], extra: list[str], reasoning: bool
) -> None:
    events = _events(plan, cuts, extra)
    fast = _responses_stream(ResponseBuilder.stream_event, events, reasoning)
    assert fast == _responses_stream(_general, events, reasoning)


def _responses_stream(
    encode: Callable[[ResponseBuilder, Event], bytes | None], events: list[Event], reasoning: bool
) -> list[bytes | None]:
    """What ``encode`` writes for each event, then the last item's close (its
    ``output_text.done`` carries the whole text kept), the builder's ids numbered
    from 0 (so two runs name their items alike, and a wrong item's id shows)."""
    numbers = itertools.count()
    with patch("toolrelay.server.responses.wire.unique_hex", lambda: f"{next(numbers):032x}"):
        builder = ResponseBuilder("m", {}, reasoning)
        written = [encode(builder, event) for event in events]
        return [*written, b"".join(map(sse, builder.end_block()))]


JSON = json_trees(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    st.text(max_size=4),
    leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON, max_size=4), st.booleans())
def test_responses_start_encodes_its_snapshot_once_to_the_same_bytes(
    echo: dict[str, Any], reasoning: bool
) -> None:
    builder = ResponseBuilder("m", echo, reasoning)
    snapshot = {**builder.response, "output": []}
    expected = [
        {"type": kind, "sequence_number": number, "response": snapshot}
        for number, kind in enumerate(["response.created", "response.in_progress"])
    ]
    assert builder.start() == b"".join(map(sse, expected))
