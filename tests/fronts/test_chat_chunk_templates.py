"""The Chat Completions encoder writes a call's start and the last choice chunk from
byte templates: the same bytes as ``orjson.dumps`` of the chunk's dict, whatever the
id, the name, the index, the finish reason and the usage setting."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.events import ToolCallStart
from toolrelay.io.round import Finish
from toolrelay.server.chat.wire import DONE, ChunkEncoder

# Text heavy in what JSON escapes.
TEXT = st.text(
    alphabet=st.sampled_from(list(' \n"\\aé\u2028\x01{}'))
    | st.characters(exclude_categories=("Cs",)),
    max_size=12,
)
REASON = st.one_of(st.sampled_from(["stop", "tool_calls", "length"]), TEXT)


def _common(encoder: ChunkEncoder) -> dict[str, Any]:
    """The keys every chunk of the stream shares, as its first chunk has them."""
    first = orjson.loads(encoder.start()[len(b"data: ") :])
    return {key: first[key] for key in ("id", "object", "created", "model")}


@settings(max_examples=300)
@given(index=st.integers(0, 10**6), call_id=TEXT, name=TEXT, model=TEXT, usage=st.booleans())
def test_a_call_start_is_the_chunk_of_its_delta(
    index: int, call_id: str, name: str, model: str, usage: bool
) -> None:
    encoder = ChunkEncoder(model, usage)
    start = {"index": index, "id": call_id, "type": "function"}
    start["function"] = {"name": name, "arguments": ""}
    written = encoder.event(ToolCallStart(index, call_id, name))
    assert written == encoder.delta({"tool_calls": [start]})


@settings(max_examples=300)
@given(reason=REASON, model=TEXT, usage=st.booleans())
def test_the_last_choice_chunk_is_its_dict_written(reason: str, model: str, usage: bool) -> None:
    encoder = ChunkEncoder(model, usage)
    finish = Finish(reason, {"prompt_tokens": 1}, None, None, "", "native")
    chunk: dict[str, Any] = {
        **_common(encoder),
        "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}],
    }
    if usage:
        chunk["usage"] = None
    last = b"data: " + orjson.dumps(chunk) + b"\n\n"
    if usage:
        usage_chunk = {**_common(encoder), "choices": [], "usage": {"prompt_tokens": 1}}
        last += b"data: " + orjson.dumps(usage_chunk) + b"\n\n"
    assert encoder.finish(finish, {}) == last + DONE
    # toolrelay's keys ride on it, after the choice's (and usage's) keys.
    chunk["toolrelay_warning"] = "w"
    written = encoder.finish(finish, {"toolrelay_warning": "w"})
    assert written.startswith(b"data: " + orjson.dumps(chunk) + b"\n\n")
