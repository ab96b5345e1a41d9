"""The Chat Completions encoder's written-out chunks against building and encoding the dict.

``ChunkEncoder.event`` writes the most frequent chunks (content, argument
fragments) as bytes around the encoded text, without building their dicts;
these properties hold each to the chunk built the plain way, for any text.
"""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.events import ContentDelta, ToolCallArgumentsDelta
from toolrelay.server.chat.wire import ChunkEncoder


def _sse(data: bytes) -> object:
    assert data.startswith(b"data: ") and data.endswith(b"\n\n")
    return orjson.loads(data[6:-2])


@given(st.text(min_size=1), st.booleans())
def test_a_content_chunk_is_its_delta(text: str, usage: bool) -> None:
    encoder = ChunkEncoder("m", usage)
    fast = encoder.event(ContentDelta(text))
    assert fast is not None
    assert fast == encoder.delta({"content": text})
    chunk = _sse(fast)
    assert isinstance(chunk, dict)
    assert chunk["choices"] == [
        {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    ]


@given(st.text(min_size=1), st.integers(0, 99), st.booleans())
def test_an_argument_fragment_is_its_delta(text: str, index: int, usage: bool) -> None:
    encoder = ChunkEncoder("m", usage)
    fast = encoder.event(ToolCallArgumentsDelta(index, text))
    assert fast is not None
    fragment = {"index": index, "function": {"arguments": text}}
    assert fast == encoder.delta({"tool_calls": [fragment]})


def test_an_empty_text_sends_nothing() -> None:
    encoder = ChunkEncoder("m", False)
    assert encoder.event(ContentDelta("")) is None
    assert encoder.event(ToolCallArgumentsDelta(0, "")) is None
