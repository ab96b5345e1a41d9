"""The loop guard's first question, whether the window holds an assistant turn,
answered at once when the history ends with the user's own text (most requests):
the same answer as reading the window, for any history."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.stuck import StuckConfig
from toolrelay.stuck.detector import _assistant_in_window, _turn_in_window
from toolrelay.stuck.transcript import TAG

_TEXTS = st.one_of(
    st.sampled_from(["hi", "", f"{TAG}blocked cycle] NOT EXECUTED", f"say {TAG}"]),
    st.text(max_size=12),
)
_CONTENT = st.one_of(
    _TEXTS,
    st.none(),
    st.integers(),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXTS}) | _TEXTS, max_size=2),
)
_CALLS = st.lists(
    st.fixed_dictionaries(
        {"id": st.sampled_from(["c1", "c2"]), "type": st.just("function")},
        optional={"function": st.fixed_dictionaries({"name": st.just("read")})},
    ),
    max_size=3,
)
_MESSAGES = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "developer", None])},
        optional={"content": _CONTENT, "tool_calls": _CALLS | st.integers()},
    ),
    st.none(),
    st.text(max_size=3),
    st.integers(),
)


class _Message(dict):  # type: ignore[type-arg]
    """A dict of another type: read through the window, never the shortcut."""


@settings(max_examples=400, deadline=None)
@given(
    messages=st.lists(_MESSAGES, max_size=6),
    subclassed=st.booleans(),
    window=st.integers(1, 4),
)
def test_the_shortcut_answers_as_the_window(
    messages: list[Any], subclassed: bool, window: int
) -> None:
    if subclassed and messages and isinstance(messages[-1], dict):
        messages[-1] = _Message(messages[-1])
    config = StuckConfig(window_max_calls=window)
    assert _turn_in_window(messages, config) is _assistant_in_window(messages, config)
    assert _turn_in_window(tuple(messages), config) is _assistant_in_window(messages, config)


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(_MESSAGES, max_size=4),
    last=st.fixed_dictionaries({"role": st.just("user")}, optional={"content": _CONTENT}),
    window=st.integers(1, 4),
)
def test_the_user_turn_last_answers_as_the_window(
    before: list[Any], last: dict[str, Any], window: int
) -> None:
    """The shortcut's own case, the guard's notes (``TAG``) in the user's text too."""
    messages = [*before, {"role": "assistant", "content": "x"}, *before, last]
    config = StuckConfig(window_max_calls=window)
    assert _turn_in_window(messages, config) is _assistant_in_window(messages, config)
