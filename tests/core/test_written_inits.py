"""The ``__init__`` the stream's and the request's values write out
(``toolrelay.events``, the round's ``Opened``, ``Finish`` and ``RoundRequest``, the
fronts' turns, ``OwnOptions``: compiled, where the one ``dataclass`` generates stays
Python) against the one ``dataclass`` generates from the same fields: the same
values in the same fields, by position and by name, with the same defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.choice import declared_tools, resolve_tool_choice
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.round.request import Finish, Opened, RoundRequest
from toolrelay.server.anthropic.request import MessagesTurn
from toolrelay.server.chat.request import ChatRequest
from toolrelay.server.reading import OwnOptions
from toolrelay.server.responses.request import ResponsesTurn

_TEXT = st.text(max_size=8)
_ARGUMENTS_OF_A_CALL = st.dictionaries(_TEXT, _TEXT | st.integers(), max_size=3)
_CALLS = st.builds(ToolCall, _TEXT, _TEXT, _ARGUMENTS_OF_A_CALL, _TEXT)
_MAYBE_TEXT = st.none() | _TEXT
_MODES = st.sampled_from([None, "native", "rescue"])
_MAYBE_BOOL = st.none() | st.booleans()
_TOOL_LISTS = st.sampled_from(
    [
        [],
        [{"type": "function", "function": {"name": "get_weather"}}],
        [
            {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
            {"type": "function", "function": {"name": "search"}},
        ],
    ]
)
_TEXTS = st.lists(_TEXT, max_size=2).map(tuple)
_ROUND_ARGUMENTS = st.tuples(
    st.dictionaries(_TEXT, _TEXT, max_size=2),  # body
    _TEXT,  # model
    st.lists(st.fixed_dictionaries({"role": _TEXT, "content": _TEXT}), max_size=2),
    st.none() | _TOOL_LISTS,  # tools
    st.sampled_from(
        [None, "auto", "none", "required", {"type": "function", "function": {"name": "search"}}]
    ),
    st.booleans(),  # parallel_tool_calls
    _TEXT,  # format
    st.sampled_from([None, "auto", "native", "rescue"]),  # tool_mode
    _MAYBE_BOOL,  # omit_tool_choice
    _MAYBE_TEXT,  # profile
    st.sampled_from(["stop", "tool_calls"]),
    st.sampled_from(["repair", "warn", "off"]),
    st.sampled_from(["auto", "off", "json_schema", "grammar", "structural_tag"]),
    _TEXTS,  # correcting
    st.booleans(),  # stream_tools
    _MAYBE_BOOL,  # reasoning_open
    _MAYBE_TEXT,  # auth
    _MAYBE_TEXT,  # affinity
    _TEXTS,  # injected
    st.none() | _TOOL_LISTS.map(declared_tools),  # declared
).map(list)
_ROUNDS = st.builds(RoundRequest, st.just({}), _TEXT, st.just([]), st.none() | _TOOL_LISTS)
_STUCK_MODES = st.sampled_from([None, "enforce", "observe", "off"])
_TURN_ARGUMENTS = (_ROUNDS, st.booleans(), _STUCK_MODES, _MAYBE_TEXT)

# Each class's arguments in field order, a value of its declared type for each.
_ARGUMENTS: dict[type, st.SearchStrategy[list[Any]]] = {
    ToolCall: st.tuples(_TEXT, _TEXT, _ARGUMENTS_OF_A_CALL, _TEXT).map(list),
    ContentDelta: st.tuples(_TEXT).map(list),
    ReasoningDelta: st.tuples(_TEXT).map(list),
    ToolCallStart: st.tuples(st.integers(0, 9), _TEXT, _TEXT).map(list),
    ToolCallArgumentsDelta: st.tuples(st.integers(0, 9), _TEXT).map(list),
    ToolCallEnd: st.tuples(st.integers(0, 9), _CALLS).map(list),
    CallRejected: st.tuples(
        st.builds(RejectedCall, _MAYBE_TEXT, _TEXT, _TEXT), st.none() | st.integers(0, 9)
    ).map(list),
    Opened: st.tuples(_MODES).map(list),
    Finish: st.tuples(
        _TEXT,
        st.none() | st.dictionaries(_TEXT, st.integers(), max_size=2),
        _MAYBE_TEXT,
        _MAYBE_TEXT,
        _MAYBE_TEXT,
        _MODES,
    ).map(list),
    RoundRequest: _ROUND_ARGUMENTS,
    OwnOptions: st.tuples(_STUCK_MODES, st.dictionaries(_TEXT, _MAYBE_TEXT, max_size=2)).map(list),
    ChatRequest: st.tuples(*_TURN_ARGUMENTS, st.booleans()).map(list),
    MessagesTurn: st.tuples(*_TURN_ARGUMENTS, st.booleans()).map(list),
    ResponsesTurn: st.tuples(
        *_TURN_ARGUMENTS,
        st.dictionaries(_TEXT, _TEXT, max_size=2),  # echo
        st.booleans(),  # reasoning
        st.booleans(),  # summary
        st.booleans(),  # store
        st.lists(st.fixed_dictionaries({"role": _TEXT}), max_size=2),  # history
        st.frozensets(_TEXT, max_size=2),  # custom
        st.dictionaries(_TEXT, st.tuples(_TEXT, _TEXT), max_size=2),  # namespaced
        st.binary(max_size=4),  # echoed
    ).map(list),
}


def _round_post_init(self: Any, declared: Any) -> None:
    """What RoundRequest's __init__ does after setting its fields, as the
    __post_init__ it had: the generated __init__ calls it last."""
    self._toolset = None
    self.plan = resolve_tool_choice(self.tools if declared is None else declared, self.tool_choice)


# The __post_init__ of a class's generated twin, for a class that has one.
_POST_INITS: dict[type, Any] = {RoundRequest: _round_post_init}


def _declared(kind: type) -> list[dataclasses.Field[Any]]:
    """``kind``'s fields and init-only variables, in their declared order."""
    return list(kind.__dataclass_fields__.values())  # type: ignore[attr-defined]


def _is_init_var(field: dataclasses.Field[Any]) -> bool:
    # Its type: the annotation's text in Python, InitVar itself compiled.
    kind = field.type
    return kind is dataclasses.InitVar or str(kind).startswith("InitVar")


def _generated(kind: type) -> type:
    """A dataclass of ``kind``'s fields (frozen if it is), with the ``__init__``
    dataclass makes (and ``kind``'s ``__post_init__``, if its __init__ ends in one)."""
    fields = [
        (
            field.name,
            dataclasses.InitVar[Any] if _is_init_var(field) else Any,
            dataclasses.field(
                init=field.init, default=field.default, default_factory=field.default_factory
            ),
        )
        for field in _declared(kind)
    ]
    namespace = {"__post_init__": _POST_INITS[kind]} if kind in _POST_INITS else None
    return dataclasses.make_dataclass(
        kind.__name__,
        fields,
        frozen=kind.__dataclass_params__.frozen,  # type: ignore[attr-defined]
        namespace=namespace,
    )


def _values(value: Any) -> list[Any]:
    return [getattr(value, field.name) for field in dataclasses.fields(value)]


def _made(kind: type, *arguments: Any, **named: Any) -> Any:
    """The values ``kind`` sets from the arguments, or the error it raises."""
    try:
        return _values(kind(*arguments, **named))
    except ValueError as error:
        return type(error), str(error)


@pytest.mark.parametrize("kind", list(_ARGUMENTS), ids=lambda kind: kind.__name__)
@given(data=st.data())
def test_the_written_init_sets_what_the_generated_one_sets(kind: type, data: Any) -> None:
    arguments = data.draw(_ARGUMENTS[kind])
    parameters = [field for field in _declared(kind) if field.init]
    names = [field.name for field in parameters]
    # Any number of the trailing arguments that have a default left out.
    required = sum(
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        for field in parameters
    )
    given_count = data.draw(st.integers(required, len(arguments)))
    arguments = arguments[:given_count]
    reference = _generated(kind)
    made = _made(kind, *arguments)
    assert made == _made(reference, *arguments)
    assert _made(kind, **dict(zip(names, arguments, strict=False))) == made
    if isinstance(made, tuple):  # the error both raise
        return
    by_position = kind(*arguments)
    by_name = kind(**dict(zip(names, arguments, strict=False)))
    assert by_name == by_position
    # A default_factory's value is made afresh for each value.
    for field in parameters[given_count:]:
        if field.default_factory is not dataclasses.MISSING:
            assert getattr(by_name, field.name) is not getattr(by_position, field.name)
    if kind.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(by_position, names[0], getattr(by_position, names[0]))
    with pytest.raises(TypeError):
        kind(*arguments, *([None] * (len(names) - given_count + 1)))
