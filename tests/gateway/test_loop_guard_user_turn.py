"""The loop guard answers a request that ends with the user's own message without
the detector (``ends_with_user_turn``): for generated histories, loops among them,
its verdict and counters are the detector's in every mode."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.counters import Counters
from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import Settings
from toolrelay.server import loop_guard
from toolrelay.stuck.transcript import TAG, ends_with_user_turn, window_start

_SETTINGS = Settings(backend="http://127.0.0.1:9/v1", backend_kind="openai")

_texts = st.sampled_from(["hi", "", "ls", f"{TAG}nudge 3/5] stop", f"ok {TAG}blocked x]"])
_contents = st.one_of(
    st.none(),
    _texts,
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": _texts}),
            _texts,
            st.just({"type": "image_url"}),
        ),
        max_size=3,
    ),
)


def _call(i: int, command: str) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "run", "arguments": f'{{"command": "{command}"}}'},
    }


@st.composite
def _rounds(draw: st.DrawFn) -> list[Any]:
    """An agent's rounds: a call (often the same one again) and its result."""
    messages: list[Any] = []
    for i in range(draw(st.integers(0, 6))):
        command = draw(st.sampled_from(["ls", "ls", "ls", "pwd"]))
        messages.append({"role": "assistant", "content": None, "tool_calls": [_call(i, command)]})
        result = draw(st.sampled_from(["same", "same", "other"]))
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
    return messages


@st.composite
def _histories(draw: st.DrawFn) -> list[Any]:
    messages: list[Any] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["user", "system", "assistant", "rounds", "odd"]))
        if kind == "rounds":
            messages += draw(_rounds())
        elif kind == "odd":
            messages.append(draw(st.sampled_from(["text", None, 3])))
        else:
            messages.append({"role": kind, "content": draw(_contents)})
    return messages


def _checked(
    messages: list[Any], mode: str | None, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> tuple[Any, dict[str, Any]]:
    counters = Counters()
    with monkeypatch.context() as patch:
        if not fast:  # the general path: the detector asked every time
            patch.setattr(loop_guard, "ends_with_user_turn", lambda messages: False)
        req = RoundRequest(body={}, model="m", messages=messages)
        verdict = loop_guard.check(req, mode, _SETTINGS, counters)  # type: ignore[arg-type]
    return verdict, counters.snapshot()


@settings(max_examples=300, deadline=None)
@given(
    _histories(),
    st.sampled_from(["user", "user", "assistant", "tool", "none"]),
    _contents,
    st.sampled_from([None, "observe", "enforce", "off"]),
)
def test_a_request_ending_with_the_users_turn_gets_the_detectors_verdict(
    history: list[Any], last: str, content: Any, mode: str | None
) -> None:
    messages = history if last == "none" else [*history, {"role": last, "content": content}]
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _checked(messages, mode, monkeypatch, fast=True) == _checked(
            messages, mode, monkeypatch, fast=False
        )
    if ends_with_user_turn(messages):
        assert window_start(messages, 50) == len(messages)


def test_the_histories_hold_loops() -> None:
    # The property above compares verdicts, not only their absence.
    rounds = [
        {"role": "user", "content": "go"},
        *(
            message
            for i in range(5)
            for message in (
                {"role": "assistant", "content": None, "tool_calls": [_call(i, "ls")]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": "same"},
            )
        ),
    ]
    req = RoundRequest(body={}, model="m", messages=rounds)
    assert loop_guard.check(req, "observe", _SETTINGS, Counters()) is not None
