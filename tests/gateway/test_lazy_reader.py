"""The stream's parser and native call reader, made when first needed, against
both made up front (as every stream with tools did before).

``ChunkReader`` builds the text parser at the first content and the native call
reader at the first ``tool_calls`` delta. On generated streams (content with
Hermes calls and reasoning tags cut anywhere, native call deltas in upstream's
sloppy shapes, reasoning and finish chunks, in any mix and order, every
reasoning setting, native and rescue rounds) the lazy reader gives the same
events, the same counts and the same reasoning lesson as the eager one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.gateway.test_plain_chunks import _normal
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.round.body import ChunkReader
from toolrelay.io.round.request import StreamItem
from toolrelay.names import ToolSet
from toolrelay.undecided import stream_parser

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
TEXTS = ["Hello", " ", "\n", CALL, "<think>", "hmm", "</think>", "<tool_call>", '{"name": ', "é"]


class _Eager(ChunkReader):
    """The reader as it was: parser and native call reader made before any chunk."""

    def __init__(
        self,
        parser: Callable[[], Any] | None,
        native: Callable[[], NativeStream] | None,
        limit: int | None,
    ) -> None:
        super().__init__(parser, native, limit)
        self.parser = parser() if parser is not None else None
        self.native = native() if native is not None else None


def _content(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _native(entry: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]}


def _cut(text: str, data: st.DataObject) -> list[str]:
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=3)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if text[a:b]]


native_entries = st.fixed_dictionaries(
    {},
    optional={
        "index": st.integers(0, 2),
        "id": st.sampled_from(["call_a", "call_b", ""]),
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["get_weather", "nope"]),
                "arguments": st.sampled_from(['{"city": ', '"Paris"}', "{}", '{"ci', "", "x"]),
            },
        ),
    },
)


@st.composite
def chunks(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(["text", "plain", "native", "other"]), max_size=8)):
        if kind in ("text", "plain"):
            text = "".join(draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=3)))
            pieces = _cut(text, draw(st.data()))
            # A plain chunk comes as its text (ChunkStream's fast path), else as a dict.
            out += pieces if kind == "plain" else [_content(piece) for piece in pieces]
        elif kind == "native":
            out.append(_native(draw(native_entries)))
        else:
            out.append(
                draw(
                    st.sampled_from(
                        [
                            {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
                            {"choices": [{"index": 0, "delta": {"reasoning_content": "r"}}]},
                            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                            {"choices": [], "usage": {"total_tokens": 3}},
                        ]
                    )
                )
            )
    return out


def _run(reader: ChunkReader, stream: list[Any]) -> tuple[Any, ...]:
    batches = []
    for chunk in stream:
        out: list[StreamItem] = []
        reader.take(chunk, out)
        batches.append(_normal(out))
    end: list[StreamItem] = []
    reader.close(end)
    batches.append(_normal(end))
    return (
        batches,
        reader.saw_text,
        reader.calls,
        reader.cut,
        reader.rejected,
        reader.dropped,
        reader.text_calls,
        sorted(reader.formats.values()),
        reader.orphan_close,
        reader.parses,
        reader.finish,
        reader.usage,
        reader.raw,
    )


@given(
    stream=chunks(),
    reasoning_open=st.sampled_from([None, False, True]),
    tools=st.booleans(),
    native=st.booleans(),
    limit=st.sampled_from([None, 1]),
    format_name=st.sampled_from(["auto", "hermes"]),
)
def test_a_lazy_reader_reads_as_the_eager_one(
    stream: list[Any],
    reasoning_open: bool | None,
    tools: bool,
    native: bool,
    limit: int | None,
    format_name: str,
) -> None:
    def parser() -> Any:
        return stream_parser(TOOLS, format_name, reasoning_open=reasoning_open)

    def native_reader() -> NativeStream:
        return NativeStream(ToolSet(TOOLS))

    args = (parser if tools else None, native_reader if tools and native else None, limit)
    assert _run(ChunkReader(*args), stream) == _run(_Eager(*args), stream)
