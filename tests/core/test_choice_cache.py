"""The tool list read once: a list of JSON values is read into specs once and
kept by its JSON (toolrelay.choice), with what is derived from the specs (the
name map, the rescue prompt); what a request gets from the kept read must be
what a fresh read of its own list gives, errors included."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.choice import ToolChoicePlan, _auto_plan, declared_tools, resolve_tool_choice
from toolrelay.errors import RequestError, ToolrelayError
from toolrelay.names import ToolSet, _names_of, _validators_by_name
from toolrelay.rescue import render_tools_prompt
from toolrelay.server.chat.request import _check_tools, _checked_tools
from toolrelay.stuck.records import ToolCatalog

_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
_JSON = json_trees(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    leaves=8,
)
_NAMES = st.sampled_from(["get_weather", "search", "a", "", " x "]) | st.text(max_size=6)
_SCHEMAS = (
    st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={"properties": st.dictionaries(st.text(max_size=5), _JSON, max_size=3)},
    )
    | _JSON
)
_FUNCTION = st.fixed_dictionaries(
    {},
    optional={
        "name": _NAMES | _SCALARS,
        "description": st.text(max_size=12) | _SCALARS,
        "parameters": _SCHEMAS,
        "strict": st.booleans() | _SCALARS,
    },
)
# Entries as clients write them, well formed or not: OpenAI's, flat, custom, junk.
_ENTRIES = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": _FUNCTION}),
    st.fixed_dictionaries({"type": st.sampled_from(["function", "custom", 3])}).flatmap(
        lambda head: _FUNCTION.map(lambda body: {**head, **body})
    ),
    st.fixed_dictionaries({"type": st.just("custom"), "custom": _FUNCTION}),
    _JSON,
)
_CHOICES = st.one_of(
    st.sampled_from([None, "auto", "none", "required", "any"]),
    _NAMES.map(lambda name: {"type": "function", "function": {"name": name}}),
)


def _outcome(tools: Any, choice: Any) -> tuple[str, Any]:
    """The plan (with its declared specs, which the plan's equality leaves out), or the error."""
    try:
        plan = resolve_tool_choice(tools, choice)
    except RequestError as exc:
        return "error", (type(exc), str(exc), exc.param)
    return "plan", (plan, plan.declared)


@settings(max_examples=300, deadline=None)
@given(tools=st.lists(_ENTRIES, max_size=4), choice=_CHOICES)
def test_a_kept_read_is_a_fresh_read(tools: list[Any], choice: Any) -> None:
    # A tuple is no list: it is read afresh every time, the path without the cache.
    fresh = _outcome(tuple(copy.deepcopy(tools)), choice)
    assert _outcome(tools, choice) == fresh
    assert _outcome(copy.deepcopy(tools), choice) == fresh  # read again: now from the kept read


@settings(max_examples=100, deadline=None)
@given(tools=st.lists(_ENTRIES, min_size=1, max_size=3))
def test_no_request_values_are_kept(tools: list[Any]) -> None:
    """What a request does with its own list after it was read changes nothing kept."""
    fresh = _outcome(tuple(copy.deepcopy(tools)), None)
    mine = copy.deepcopy(tools)
    _outcome(mine, None)
    for entry in mine:
        if isinstance(entry, dict):
            body = entry.get(entry.get("type", "function"))
            target = body if isinstance(body, dict) else entry
            target["parameters"] = {"changed": True}
            target["description"] = "changed"
    assert _outcome(copy.deepcopy(tools), None) == fresh


def test_a_list_that_is_not_json_is_read_afresh() -> None:
    spec_list: list[Any] = [
        {"type": "function", "function": {"name": "f", "parameters": {"x": 1.5}}}
    ]
    first = resolve_tool_choice(spec_list, None)
    # Specs (the agent loop's own tools) pass through; they are no JSON.
    assert resolve_tool_choice(list(first.declared), None).declared == first.declared
    assert resolve_tool_choice([*first.declared, spec_list[0]], None).declared == (
        *first.declared,
        *first.declared,
    )


def test_without_tools_the_plan_is_the_same_one() -> None:
    assert resolve_tool_choice(None, None) is resolve_tool_choice([], "auto")
    assert resolve_tool_choice(None, None) == ToolChoicePlan("auto")
    assert resolve_tool_choice(None, "none") == ToolChoicePlan("none")
    assert resolve_tool_choice(None, "none").declared == ()
    with pytest.raises(RequestError, match="needs at least one tool"):
        resolve_tool_choice([], "required")


_CALLED = st.sampled_from(["get_weather", "search", "functions.search", "x__a", "a", "nope", " a "])


@settings(max_examples=200, deadline=None)
@given(tools=st.lists(_ENTRIES, max_size=4), called=st.lists(_CALLED, max_size=4))
def test_a_kept_list_names_its_tools_as_a_fresh_one(tools: list[Any], called: list[str]) -> None:
    """The names of a kept read (one tuple, mapped once) match as a fresh read's do."""
    try:
        kept = resolve_tool_choice(tools, None).declared
    except RequestError:
        return
    fresh = ToolSet(list(kept))
    for toolset in (ToolSet(kept), ToolSet(resolve_tool_choice(tools, None).declared)):
        assert toolset.declared == fresh.declared
        for name in called:
            assert toolset.resolve(name) == fresh.resolve(name)
            assert toolset.parameters(name) == fresh.parameters(name)
            assert toolset.unresolved(name) == fresh.unresolved(name)
            assert toolset.without_arguments(name) == fresh.without_arguments(name)


def test_a_tuple_of_entries_is_mapped_afresh() -> None:
    """A tuple of entries (dicts a caller may still change) is no read: mapped anew each time."""
    entries = ({"type": "function", "function": {"name": "before"}},)
    assert ToolSet(entries).resolve("before") == "before"
    entries[0]["function"]["name"] = "after"
    assert ToolSet(entries).resolve("after") == "after"
    assert ToolSet(entries).resolve("before") is None


@settings(max_examples=200, deadline=None)
@given(tools=st.lists(_ENTRIES, max_size=4))
def test_a_kept_list_catalogues_as_its_entries(tools: list[Any]) -> None:
    """The stuck detector's catalog of a read (kept with it) is the catalog of the
    entries it was read from, which the loop guard read before."""
    try:
        declared = declared_tools(copy.deepcopy(tools))
    except RequestError:
        return
    for _ in range(2):  # made, then kept
        assert ToolCatalog.from_tools(declared) == ToolCatalog.from_tools(copy.deepcopy(tools))


def _prompts(tools: Any) -> tuple[str, Any, Any]:
    """The rescue prompts (free and constrained) of a list's tools, or the error."""
    try:
        return "prompts", render_tools_prompt(tools), render_tools_prompt(tools, constrained=True)
    except RequestError as exc:
        return "error", (type(exc), str(exc), exc.param), None


@settings(max_examples=200, deadline=None)
@given(tools=st.lists(_ENTRIES, min_size=1, max_size=4))
def test_a_kept_list_renders_as_a_fresh_one(tools: list[Any]) -> None:
    """The rescue prompt kept with a read is the prompt of the specs, rendered afresh;
    what the request does with its list afterwards does not reach it."""
    try:
        fresh_specs = list(declared_tools(tuple(copy.deepcopy(tools))))
    except RequestError:
        return
    fresh = _prompts(fresh_specs)  # a list of specs is no read: rendered afresh
    mine = copy.deepcopy(tools)
    assert _prompts(declared_tools(mine)) == fresh
    for entry in mine:
        if isinstance(entry, dict):
            entry["description"] = "changed"
            body = entry.get(entry.get("type", "function"))
            if isinstance(body, dict):
                body["description"] = "changed"
    assert _prompts(declared_tools(copy.deepcopy(tools))) == fresh  # now kept


def test_a_kept_read_is_made_once() -> None:
    tools = [{"type": "function", "function": {"name": "once", "description": "kept"}}]
    first = declared_tools(copy.deepcopy(tools))
    assert declared_tools(copy.deepcopy(tools)) is first
    assert declared_tools(first) is first  # a read passes through as it is
    assert render_tools_prompt(first) is render_tools_prompt(declared_tools(tools))


@settings(max_examples=200, deadline=None)
@given(tools=st.lists(_ENTRIES, max_size=4))
def test_what_a_read_made_is_what_derived_gives(tools: list[Any]) -> None:
    """The compiled readers take what a read made from its ``made`` before asking
    ``derived`` (a Python frame): read first or again, a set's map and checks, the
    auto plan and Chat's check are the ones ``derived`` keeps, and the map is a
    fresh set's."""
    try:
        declared = declared_tools(copy.deepcopy(tools))
    except RequestError:
        return
    for _ in range(2):  # made, then read from what was made
        toolset = ToolSet(declared)
        assert toolset._by_name is declared.derived(_names_of, dict)
        assert toolset._validators is declared.derived(_validators_by_name, dict)
        assert toolset._by_name == ToolSet(list(declared))._by_name
        if declared:
            plan = resolve_tool_choice(declared, None)
            assert plan is declared.made[_auto_plan]
            assert plan == ToolChoicePlan("auto", declared, declared=declared)
    # Chat's check of the entries, kept with the read when it passed; a list that
    # fails it fails again the same way (nothing kept).
    first = _chat_checked(tools)
    assert _chat_checked(tools) == first
    if first[0] == "checked":
        assert first[1] is declared and _check_tools in declared.made


def _chat_checked(tools: list[Any]) -> tuple[str, Any]:
    """Chat's read of a request's tools, or its error."""
    try:
        return "checked", _checked_tools(copy.deepcopy(tools))
    except ToolrelayError as exc:
        return "error", (type(exc), str(exc), getattr(exc, "param", None))
