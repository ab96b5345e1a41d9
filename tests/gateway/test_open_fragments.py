"""``ChunkReader`` hands the open call's argument fragments on without its general
reading of a call event (``open_fragments``). On generated streams (native call
deltas in upstream's sloppy shapes: several calls, indices out of order, ids and
names repeated or missing, fragments cut anywhere; text calls and content between
them, whose call events wait while a native call is open; reasoning and finish
chunks; a call limit that drops calls) it gives the same items, event for event,
and the same counts as every event read the general way.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.test_lazy_reader import CALL, TOOLS, _content, _native, _run, chunks
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.round.body import ChunkReader
from toolrelay.names import ToolSet
from toolrelay.undecided import stream_parser


class _General(ChunkReader):
    """Every call event through ``_call_event``."""

    __slots__ = ()
    open_fragments = False


ARGUMENTS = '{"city":"Paris"}'
# A text call opened and closed in two chunks: native fragments between them wait.
OPENED, CLOSED = CALL[:40], CALL[40:]


@st.composite
def calls(draw: st.DrawFn) -> list[Any]:
    """Native calls streamed in fragments (indices in any order, a text call before,
    open around or after them), with content between."""
    out: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(["native", "text", "opened", "words"]), max_size=6)):
        if kind == "native":
            index = draw(st.integers(0, 3))
            out.append(
                _native(
                    {
                        "index": index,
                        "id": f"call_{index}",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                )
            )
            cuts = sorted(draw(st.sets(st.integers(1, len(ARGUMENTS) - 1), max_size=5)))
            bounds = [0, *cuts, len(ARGUMENTS)]
            for start, end in itertools.pairwise(bounds):
                out.append(
                    _native({"index": index, "function": {"arguments": ARGUMENTS[start:end]}})
                )
        elif kind == "text":
            out.append(_content(CALL))
        elif kind == "opened":
            out.append(_content(OPENED))
            out.extend(
                draw(
                    st.lists(
                        st.just(_native({"index": 0, "function": {"arguments": '"x'}})), max_size=2
                    )
                )
            )
            out.append(_content(CLOSED))
        else:
            out.append(_content("Hello "))
    return out


@settings(max_examples=300)
@given(stream=calls(), limit=st.sampled_from([None, 1, 2]))
def test_native_calls_among_text_calls_go_on_as_the_general_path_hands_them(
    stream: list[Any], limit: int | None
) -> None:
    def parser() -> Any:
        return stream_parser(TOOLS, "auto", reasoning_open=None)

    def native() -> NativeStream:
        return NativeStream(ToolSet(TOOLS))

    assert _run(ChunkReader(parser, native, limit), stream) == _run(
        _General(parser, native, limit), stream
    )


@given(
    stream=chunks(),
    text=st.booleans(),
    limit=st.sampled_from([None, 1, 2]),
)
def test_the_open_calls_fragments_go_on_as_the_general_path_hands_them(
    stream: list[Any], text: bool, limit: int | None
) -> None:
    def parser() -> Any:
        return stream_parser(TOOLS, "auto", reasoning_open=None)

    def native() -> NativeStream:
        return NativeStream(ToolSet(TOOLS))

    args = (parser if text else None, native, limit)
    assert _run(ChunkReader(*args), stream) == _run(_General(*args), stream)
