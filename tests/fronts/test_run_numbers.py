"""The Responses run writer's sequence numbers (``ResponseBuilder.text_run_bytes``,
its numbers sliced from the ones kept, ``_numbers``) are those the per-text writer
(``text_delta_bytes``, the path it skips) formats one by one, byte for byte,
wherever in a stream the run comes: below the numbers kept, across their bound
and beyond it, where they are made as they come."""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.test_content_run import RUN_TEXT
from toolrelay.events import ContentDelta
from toolrelay.server.responses import wire
from toolrelay.server.responses.wire import ResponseBuilder

# Where a run's first number falls: anywhere, and heavy around the bound of the
# numbers kept.
START = st.integers(0, 3 * wire._NUMBERS_KEPT) | st.integers(
    wire._NUMBERS_KEPT - 20, wire._NUMBERS_KEPT + 5
)
# Runs' texts: non-empty, none ending in a blank (the runs this writer is given).
TEXTS = st.lists(RUN_TEXT.filter(lambda text: text == text.rstrip()), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(START, st.integers(0, 60))
def test_the_numbers_are_their_decimal_text(start: int, count: int) -> None:
    assert wire._numbers(start, start + count) == [str(n) for n in range(start, start + count)]


@settings(max_examples=300, deadline=None)
@given(START, TEXTS)
def test_a_run_is_numbered_as_its_texts_one_by_one(start: int, texts: list[str]) -> None:
    fast, general = (_opened(start), _opened(start))
    written = fast.text_run_bytes(texts)
    assert written == b"".join(map(general.text_delta_bytes, texts))
    assert fast._sequence == general._sequence == start + len(texts)


def _opened(sequence: int) -> ResponseBuilder:
    """A builder whose message item is open, its next event numbered ``sequence``
    (its ids alike in every builder)."""
    with patch("toolrelay.server.responses.wire.unique_hex", lambda: "0" * 32):
        builder = ResponseBuilder("m", {}, False)
        assert builder.stream_event(ContentDelta("open"))
    builder._sequence = sequence
    return builder
