"""A native round without tools reads its finished answer by a short path
(``_plain_reply``): for generated answers, good and broken, and requests without
tools, the reply (every field) or the error is the general reader's."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.backends import Backend, BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.round import RoundRequest, body
from toolrelay.io.settings import BackendConfig

_BACKEND = Backend(BackendConfig(url="http://127.0.0.1:9/v1"))

_texts = st.sampled_from(["", "Hello.", "  two  words \n", "<tool_call>{}</tool_call>", "é"])
_contents = st.one_of(
    st.none(),
    _texts,
    st.integers(),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": _texts}),
            st.just({"type": "text", "text": 3}),
            st.just("loose"),
        ),
        max_size=3,
    ),
)
_finish = st.sampled_from([None, "stop", "length", "tool_calls", "content_filter", "eos", 7])
_stops = st.sampled_from([None, "END", ["END", "STOP"], 3])


@st.composite
def _answers(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": draw(_contents)}
    for key in draw(st.lists(st.sampled_from(["reasoning_content", "reasoning"]), unique=True)):
        message[key] = draw(st.one_of(st.none(), _texts, st.just(["a", {"text": "b"}])))
    if draw(st.booleans()):
        message["tool_calls"] = [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": draw(_finish)}
    if draw(st.booleans()):
        choice["stop_reason"] = draw(st.sampled_from(["END", "STOP", "other", 13, None]))
    answer: dict[str, Any] = {"choices": [choice]}
    usage = draw(st.sampled_from([None, {"prompt_tokens": 1}, "many", 5]))
    if usage is not None:
        answer["usage"] = usage
    broken = draw(st.integers(0, 11))
    if broken == 0:
        answer["choices"] = draw(st.sampled_from([[], None, "x"]))
    elif broken == 1:
        answer["choices"] = [draw(st.sampled_from([None, "x", 3]))]
    elif broken == 2:
        choice["message"] = draw(st.sampled_from([None, "x"]))
    return answer


def _request(stop: Any, parallel: bool) -> RoundRequest:
    request_body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if stop is not None:
        request_body["stop"] = stop
    if not parallel:
        request_body["parallel_tool_calls"] = False
    return RoundRequest.from_body(request_body)


def _outcome(read: Any) -> Any:
    try:
        return read()
    except BackendError as exc:
        return ("error", exc.status, exc.message)


@settings(max_examples=400, deadline=None)
@given(_answers(), _stops, st.booleans())
def test_a_plain_reply_is_the_general_readers(answer: Any, stop: Any, parallel: bool) -> None:
    req = _request(stop, parallel)
    counters = Counters()
    fast = _outcome(lambda: body.read_answer(_BACKEND, req, "native", counters, answer))
    general = _outcome(
        lambda: body._read_any_answer(_BACKEND, req, "native", Counters(), answer, False, False)
    )
    assert fast == general
    assert counters.snapshot() == Counters().snapshot()
