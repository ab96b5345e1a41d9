"""The Chat Completions encoder's written-out chunks against building and encoding the dict.

``ChunkEncoder.event`` writes the most frequent chunks (content, argument
fragments, a call's start) as bytes around the encoded values, and ``start``
and ``finish`` the stream's first and last chunks around theirs, without
building their dicts; these properties hold each to the chunk built the plain
way, for any text, id, name, model name and end.
"""

from __future__ import annotations

from unittest.mock import patch

import orjson
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.events import ContentDelta, ToolCallArgumentsDelta, ToolCallStart
from toolrelay.io.round import Finish
from toolrelay.server.chat.wire import DONE, ChunkEncoder

# Text heavy in what JSON escapes.
TEXT = st.text(
    alphabet=st.sampled_from(list(' \n"\\aé\u2028\x01{}'))
    | st.characters(exclude_categories=("Cs",)),
    max_size=12,
)


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


@given(st.integers(0, 10**6), TEXT, TEXT, TEXT, st.booleans())
def test_a_call_start_is_its_delta(
    index: int, call_id: str, name: str, model: str, usage: bool
) -> None:
    encoder = ChunkEncoder(model, usage)
    start = {"index": index, "id": call_id, "type": "function"}
    start["function"] = {"name": name, "arguments": ""}
    written = encoder.event(ToolCallStart(index, call_id, name))
    assert written == encoder.delta({"tool_calls": [start]})


def test_an_empty_text_sends_nothing() -> None:
    encoder = ChunkEncoder("m", False)
    assert encoder.event(ContentDelta("")) is None
    assert encoder.event(ToolCallArgumentsDelta(0, "")) is None


@given(TEXT, st.booleans())
def test_the_first_chunk_is_its_delta(model: str, usage: bool) -> None:
    encoder = ChunkEncoder(model, usage)
    assert encoder.start() == encoder.delta({"role": "assistant", "content": None})


@given(TEXT, TEXT, st.booleans())
def test_the_chunks_open_with_their_common_keys(made_id: str, model: str, usage: bool) -> None:
    """The keys every chunk opens with, written from a template around the id,
    the time and the model, are those of ``_common`` encoded, for any id (as
    ``unique_hex`` gives them, made up here) and model."""
    with patch("toolrelay.server.chat.wire.unique_hex", lambda: made_id):
        encoder = ChunkEncoder(model, usage)
    common = encoder._common
    assert common["id"] == "chatcmpl-" + made_id and common["model"] == model
    assert list(common) == ["id", "object", "created", "model"]
    delta = {"role": "assistant", "content": None}
    chunk = {
        **common,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}],
    }
    if usage:
        chunk["usage"] = None
    assert encoder.start() == b"data: " + orjson.dumps(chunk) + b"\n\n"


_USAGES = st.none() | st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens", "details"]),
    st.integers(0, 10**9) | st.text() | st.none(),
)
_EXTRA = st.dictionaries(st.sampled_from(["toolrelay_warning", "toolrelay_stuck", "id"]), st.text())


@given(
    TEXT, st.booleans(), st.sampled_from(["stop", "tool_calls", "length"]) | TEXT, _USAGES, _EXTRA
)
def test_the_last_chunks_are_their_dicts(
    model: str, usage: bool, reason: str, counts: dict[str, object] | None, extra: dict[str, str]
) -> None:
    """The finish chunk, the usage chunk and [DONE], written around the reason
    and the counts, are the bytes of the dicts built and encoded."""
    encoder = ChunkEncoder(model, usage)
    finish = Finish(reason, counts)
    common = encoder._common
    chunk = {
        **common,
        "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}],
    }
    if usage:
        chunk["usage"] = None
    chunk.update(extra)
    built = b"data: " + orjson.dumps(chunk) + b"\n\n"
    if usage:
        zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        last = {**common, "choices": [], "usage": counts or zero}
        built += b"data: " + orjson.dumps(last) + b"\n\n"
    assert encoder.finish(finish, dict(extra)) == built + DONE
