"""A read's run of plain content (:class:`ContentRun`) written at once by each front's
encoder (``Encoder.run``: Chat Completions' chunks, ``Blocks.stream_run`` for
Messages and Responses) writes exactly what the encoder writes for each of its
texts' ``ContentDelta`` (``Encoder.event``, the path it skips), whatever the texts
(blanks at their ends or alone, beyond ASCII, ``%``), whatever is open when the
run comes (nothing, reasoning, a call, a held blank) and whatever comes after it,
and leaves the same message or response behind."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.segments import events_of
from toolrelay.events import ContentDelta, Event
from toolrelay.io.round import ContentRun, Finish
from toolrelay.server.anthropic.wire import MessageBuilder, MessageEncoder
from toolrelay.server.blocks import sse
from toolrelay.server.chat.wire import ChunkEncoder
from toolrelay.server.responses.wire import ResponseBuilder

# What a run's texts may hold (no quote, backslash or control character: what
# PlainChunks.read_all proves), heavy in the blanks the builders hold back,
# those ``isspace`` names beyond ASCII too, and in ``%``.
RUN_TEXT = st.lists(
    st.sampled_from(["abcd", " the", "a ", " ", "\xa0", "\u3000", "\x85", "%", "%d", "é", "😀"])
    | st.characters(exclude_categories=("Cs",), exclude_characters='"\\', min_codepoint=0x20),
    min_size=1,
    max_size=4,
).map("".join)
RUN = st.lists(RUN_TEXT, min_size=1, max_size=6).map(ContentRun)
PLAN = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.text(max_size=12)),
        st.tuples(st.just("reasoning"), st.text(max_size=12)),
        st.tuples(
            st.just("call"), st.dictionaries(st.text(max_size=3), st.text(max_size=5), max_size=2)
        ),
    ),
    max_size=5,
)
Item = Event | ContentRun


@st.composite
def streams(draw: st.DrawFn) -> list[Item]:
    """Parser events as a model writes them, runs put anywhere among them."""
    events: list[Item] = [*events_of(draw(PLAN), draw(st.lists(st.integers(0, 20), max_size=4)))]
    for _ in range(draw(st.integers(0, 4))):
        events.insert(draw(st.integers(0, len(events))), draw(RUN))
    return events


def _general(event: Callable[[Event], bytes | None], run: ContentRun) -> bytes | None:
    """What the encoder writes for each of the run's texts' ContentDelta."""
    return b"".join(filter(None, (event(ContentDelta(text)) for text in run.texts))) or None


def _written(encoder: Any, items: list[Item], *, runs: bool) -> list[bytes | None]:
    """What ``encoder`` writes for each item: a run at once, or text by text."""
    out = []
    for item in items:
        if isinstance(item, ContentRun):
            out.append(encoder.run(item) if runs else _general(encoder.event, item))
        else:
            out.append(encoder.event(item))
    return out


@settings(max_examples=400, deadline=None)
@given(streams(), st.booleans())
def test_chat_completions_writes_a_run_as_its_texts(items: list[Item], usage: bool) -> None:
    encoder = ChunkEncoder("m", usage)
    assert _written(encoder, items, runs=True) == _written(encoder, items, runs=False)


@settings(max_examples=400, deadline=None)
@given(streams(), st.booleans())
def test_messages_writes_a_run_as_its_texts(items: list[Item], thinking: bool) -> None:
    fast, general = (_messages(items, thinking, runs) for runs in (True, False))
    assert fast == general


def _messages(items: list[Item], thinking: bool, runs: bool) -> tuple[Any, ...]:
    """What the Messages encoder writes for ``items`` and at the end, the message it
    holds (ids numbered from 0, so that two encoders name their message alike)."""
    numbers = itertools.count()
    with patch("toolrelay.server.anthropic.wire.unique_hex", lambda: f"{next(numbers):032x}"):
        encoder = MessageEncoder("m", thinking)
    written = _written(encoder, items, runs=runs)
    end = encoder.finish(Finish("stop"), {})
    # (A call's input is an orjson.Fragment: compared as JSON.)
    return written, end, orjson.dumps(encoder.builder.message)


@settings(max_examples=400, deadline=None)
@given(streams(), st.booleans(), st.booleans())
def test_responses_writes_a_run_as_its_texts(
    items: list[Item], reasoning: bool, summary: bool
) -> None:
    fast, general = (_responses(items, reasoning, summary, runs) for runs in (True, False))
    assert fast == general


class _ResponseWriter:
    """The Responses front's encoder as the relay uses it: the builder's own methods."""

    def __init__(self, builder: ResponseBuilder) -> None:
        self.event = builder.stream_event
        self.run = builder.stream_run


def _responses(items: list[Item], reasoning: bool, summary: bool, runs: bool) -> tuple[Any, ...]:
    """What the Responses builder writes for ``items`` and at the end (every event's
    sequence number in it), its ids numbered from 0 and its time 0."""
    numbers = itertools.count()
    with (
        patch("toolrelay.server.responses.wire.unique_hex", lambda: f"{next(numbers):032x}"),
        # The clock itself: a compiled module (setup.py) holds the time module, not its name.
        patch("time.time", lambda: 0.0),
    ):
        builder = ResponseBuilder("m", {}, reasoning, summary=summary)
        written = _written(_ResponseWriter(builder), items, runs=runs)
        end = b"".join(map(sse, builder.finish(Finish("stop"), {})))
    return written, end, orjson.dumps(builder.response)


class _PerTextCounted(MessageBuilder):
    """The Messages builder, counting the texts it writes one by one (its
    ``stream_event``): a subclass, as compiled code (setup.py) calls the
    builder's own methods past a patch on its class."""

    def __init__(self) -> None:
        super().__init__("m", False)
        self.per_text = 0

    def stream_event(self, event: Event) -> bytes | None:
        self.per_text += 1
        return super().stream_event(event)


def test_a_run_in_the_open_text_block_is_one_writing() -> None:
    """By hand: the usual run (the text block open, no blank held, none at a text's
    end) is written from the run's templates, and its texts are the block's."""
    builder = _PerTextCounted()
    builder.stream_event(ContentDelta("Hi"))
    builder.per_text = 0
    data = builder.stream_run(ContentRun([" there", ",", " you"]))
    assert builder.per_text == 0
    assert data is not None and data.count(b"content_block_delta\n") == 3
    assert b'"text":" you"}}\n\n' in data
    # The count sees the other way: a run whose text ends in a blank goes text by text.
    builder.stream_run(ContentRun([" again", " "]))
    assert builder.per_text == 2
    assert builder.end_block()
    assert builder.message["content"][0]["text"] == "Hi there, you again"
