"""The request's setup done once or skipped where it finds nothing (issue 29):
each fast path gives what the full step gives, for generated inputs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.conform import id_style
from toolrelay.io.models import ModelNames
from toolrelay.io.settings import Settings
from toolrelay.server.chat import request as chat_request
from toolrelay.server.errors import APIError

_NAMES = st.sampled_from(["bench", "claude-sonnet-4-5", "gpt-5-codex", "qwen3", "a*"]) | st.text(
    min_size=1, max_size=8
)
_ALIASES = st.lists(st.tuples(_NAMES, _NAMES), max_size=3)


@settings(max_examples=200, deadline=None)
@given(aliases=_ALIASES, catch_all=st.none() | _NAMES, names=st.lists(_NAMES, max_size=4))
def test_backend_name_is_the_resolved_model(
    aliases: list[tuple[str, str]], catch_all: str | None, names: list[str]
) -> None:
    fast, full = ModelNames(aliases, catch_all), ModelNames(aliases, catch_all)
    for name in names:
        assert fast.backend_name(name) == full.resolve(name).model


@settings(max_examples=200, deadline=None)
@given(format_name=st.sampled_from(["auto", "mistral", "kimi_k2", "hermes"]), model=_NAMES)
def test_id_style_kept_per_model_is_the_fresh_one(format_name: str, model: str) -> None:
    assert id_style(format_name, model) == id_style.__wrapped__(format_name, model)
    assert id_style(format_name, model) == id_style.__wrapped__(format_name, model)


_SAMPLING_VALUES = (
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.text(max_size=2)
)


def _checked_in_full(body: dict[str, Any]) -> str | None:
    """The sampling fields' check as it ran before the skip: every field, in order."""
    for key in chat_request._NUMBERS:
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"'{key}' must be a number."
    for key in chat_request._INTEGERS:
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return f"'{key}' must be an integer."
    return None


@pytest.fixture(scope="module")
def gateway_settings() -> Settings:
    return Settings(backend="http://127.0.0.1:9/v1", backend_kind="openai")


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from([*chat_request._NUMBERS, *chat_request._INTEGERS, "user", "stop"]),
        _SAMPLING_VALUES,
        max_size=4,
    )
)
def test_sampling_fields_are_checked_as_before(
    gateway_settings: Settings, fields: dict[str, Any]
) -> None:
    body = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], **fields}
    body.pop("stop", None)
    try:
        chat_request.read_request(body, gateway_settings)
    except APIError as exc:
        assert exc.message == _checked_in_full(body)
    else:
        assert _checked_in_full(body) is None
