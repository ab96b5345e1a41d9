"""The request's setup done once or skipped where it finds nothing (issue 29):
each fast path gives what the full step gives, for generated inputs."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.choice import resolve_tool_choice
from toolrelay.conform import id_style
from toolrelay.io.models import ModelNames
from toolrelay.io.settings import Settings
from toolrelay.repair import MAX_DEPTH
from toolrelay.server.asgi import _WRAP, _may_nest_too_deep, _too_deep, decode
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


_PADDED = json_trees(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(alphabet='{}[]"\\ab', max_size=6),
    st.text(max_size=3),
    leaves=6,
    object_width=None,
)


@settings(max_examples=200, deadline=None)
@given(
    depth=st.integers(min_value=0, max_value=MAX_DEPTH + 8),
    padding=st.sampled_from([0, 100, 3000, 5000, 20000]),
    filler=_PADDED,
)
def test_the_nesting_check_answers_as_the_full_check(depth: int, padding: int, filler: Any) -> None:
    """Small bodies skip the check by their length or brackets, large ones are
    encoded again: every body is refused exactly when the full check refuses it."""
    nested: Any = filler
    for _ in range(depth):
        nested = [nested]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * padding}],
        "metadata": nested,
    }
    raw = orjson.dumps(body)
    refused = _too_deep(orjson.loads(raw), _WRAP)
    if not _may_nest_too_deep(raw):
        assert not refused
    if refused:
        with pytest.raises(APIError):
            decode(raw)
    else:
        assert decode(raw) == orjson.loads(raw)


_TOOL_VALUES = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=4)
_FUNCTIONS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["get_weather", "search", ""]) | _TOOL_VALUES,
        "description": st.text(max_size=6) | _TOOL_VALUES,
        "parameters": st.just({"type": "object"}) | _TOOL_VALUES | st.lists(_TOOL_VALUES),
    },
)
# Chat Completions tool entries, well formed or not (what the front's check refuses too).
_TOOL_ENTRIES = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": _FUNCTIONS}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["function", "custom", 3])},
        optional={"function": _FUNCTIONS | _TOOL_VALUES, "custom": _FUNCTIONS},
    ),
    _FUNCTIONS,
    _TOOL_VALUES,
)


def _read_in_full(tools: list[Any]) -> tuple[str, Any]:
    """The tools as the front read them before the check was kept: every entry
    checked, then a fresh read (a tuple is read afresh) and the plan."""
    try:
        chat_request._check_tools(tools)
        plan = resolve_tool_choice(tuple(tools), None)
    except APIError as exc:
        return "error", (exc.message, exc.param)
    return "plan", (plan, plan.declared)


def _read(gateway_settings: Settings, tools: list[Any]) -> tuple[str, Any]:
    body = {"model": "bench", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    try:
        plan = chat_request.read_request(body, gateway_settings).round.plan
    except APIError as exc:
        return "error", (exc.message, exc.param)
    return "plan", (plan, plan.declared)


@settings(max_examples=300, deadline=None)
@given(tools=st.lists(_TOOL_ENTRIES, max_size=3))
def test_a_kept_lists_check_answers_as_the_full_check(
    gateway_settings: Settings, tools: list[Any]
) -> None:
    """The check of a list's entries is kept with its read: a list read again (the
    same JSON) gets the error or the plan the full check and a fresh read give."""
    full = _read_in_full(copy.deepcopy(tools))
    assert _read(gateway_settings, copy.deepcopy(tools)) == full
    assert _read(gateway_settings, copy.deepcopy(tools)) == full  # now from the kept read
