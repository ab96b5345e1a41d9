"""What a request with tools finds made once per kept tool list: a declared tool's
compiled argument check (``ToolSet.valid_as_sent``) and the ``auto`` plan. Each is
held to what it stands for, made afresh: ``toolrelay.validate.valid_as_sent`` of
the tool's parameters, and the plan built anew; a kept answer (the second ask, a
second tool set of the same list) is the first one's."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.choice import ToolChoicePlan, declared_tools, resolve_tool_choice
from toolrelay.errors import RequestError
from toolrelay.names import ToolSet
from toolrelay.validate import valid_as_sent

_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=6)
_JSON = json_trees(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    leaves=8,
)
_NAMES = st.sampled_from(["get_weather", "search", "a", "", "functions.a"])
_TYPES = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])
_PROPERTIES = st.dictionaries(
    st.sampled_from(["city", "n", "when", "a"]),
    st.fixed_dictionaries({"type": _TYPES}) | st.fixed_dictionaries({}) | _JSON,
    max_size=3,
)
# Schemas a client writes, usable or not (jsonschema_rs refuses some: checked as
# "an object" then), or none at all.
_SCHEMAS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": _PROPERTIES,
            "required": st.lists(st.sampled_from(["city", "n", "x"]), max_size=2),
            "additionalProperties": st.booleans(),
        },
    ),
    st.fixed_dictionaries({"type": _TYPES | st.integers()}),
    _JSON,
)
_ENTRIES = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("function"), "function": st.fixed_dictionaries({"name": _NAMES})},
        optional={},
    ).flatmap(
        lambda entry: (
            _SCHEMAS.map(
                lambda schema: {**entry, "function": {**entry["function"], "parameters": schema}}
            )
            | st.just(entry)
        )
    ),
    st.fixed_dictionaries({"name": _NAMES}, optional={"parameters": _SCHEMAS}),
)
_ARGUMENTS = st.one_of(
    st.dictionaries(
        st.sampled_from(["city", "n", "when", "x"]),
        _SCALARS | st.floats(allow_nan=False) | st.lists(_SCALARS, max_size=2),
        max_size=3,
    ),
    _JSON,
    st.just({"city": "\ud800"}),  # no JSON carries it: the tool's to judge
)


def _read(tools: list[Any]) -> Any:
    try:
        return declared_tools(tools)
    except RequestError:
        return None


@settings(max_examples=300, deadline=None)
@given(
    tools=st.lists(_ENTRIES, min_size=1, max_size=3),
    calls=st.lists(st.tuples(_NAMES | st.just("nope"), _ARGUMENTS), min_size=1, max_size=5),
)
def test_a_kept_check_is_the_check_made_afresh(
    tools: list[Any], calls: list[tuple[str, Any]]
) -> None:
    declared = _read(copy.deepcopy(tools))
    if declared is None:
        return
    # Every ask twice (the first compiles and keeps, the second takes the kept), in a
    # set of the kept read, in a second set of it (its checks shared), and in a set of
    # the entries themselves (a list no one keeps).
    sets = (ToolSet(declared), ToolSet(_read(copy.deepcopy(tools))), ToolSet(tools))
    for name, arguments in calls + calls:
        for toolset in sets:
            expected = valid_as_sent(toolset.parameters(name), arguments)
            assert toolset.valid_as_sent(name, arguments) is expected


@settings(max_examples=200, deadline=None)
@given(tools=st.lists(_ENTRIES, min_size=1, max_size=3), choice=st.sampled_from([None, "auto"]))
def test_the_kept_auto_plan_is_the_plan_made_afresh(tools: list[Any], choice: Any) -> None:
    declared = _read(copy.deepcopy(tools))
    if not declared:
        return
    made = ToolChoicePlan("auto", declared, declared=declared)
    # A list the cache cannot key (an integer beyond 64 bits in a schema) is read
    # afresh every time: its plan is equal, not the kept one.
    kept = _read(copy.deepcopy(tools)) is declared
    for _ in range(2):
        plan = resolve_tool_choice(copy.deepcopy(tools), choice)
        assert plan == made
        assert plan.tools == made.tools and plan.declared == made.declared
        assert plan.tools is plan.declared
        if kept:
            assert plan.declared is declared  # the kept read, not a copy
            assert resolve_tool_choice(copy.deepcopy(tools), choice) is plan  # made once
