"""The ``__init__`` the stream's values write out (``toolrelay.events``, the round's
``Opened`` and ``Finish``, the Messages front's turn: compiled, where the one
``dataclass`` generates stays Python) against the one ``dataclass`` generates
from the same fields: the same values in the same fields, by position and by
name, with the same defaults, frozen where the class is."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
from toolrelay.io.round.request import Finish, Opened
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic.request import MessagesTurn, read_messages

_TEXT = st.text(max_size=8)
_ARGUMENTS_OF_A_CALL = st.dictionaries(_TEXT, _TEXT | st.integers(), max_size=3)
_CALLS = st.builds(ToolCall, _TEXT, _TEXT, _ARGUMENTS_OF_A_CALL, _TEXT)
_MAYBE_TEXT = st.none() | _TEXT
_MODES = st.sampled_from([None, "native", "rescue"])
# A turn's round: two requests' (a compiled turn holds a RoundRequest only).
_ROUNDS = st.sampled_from(
    [
        read_messages(
            {"model": "m", "max_tokens": tokens, "messages": [{"role": "user", "content": "hi"}]},
            Settings(),
        ).round
        for tokens in (1, 2)
    ]
)

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
    MessagesTurn: st.tuples(
        _ROUNDS,
        st.booleans(),
        st.sampled_from([None, "enforce", "observe", "off"]),
        _MAYBE_TEXT,
        st.booleans(),
    ).map(list),
}


def _frozen(kind: type) -> bool:
    return bool(kind.__dataclass_params__.frozen)  # type: ignore[attr-defined]


def _generated(kind: type) -> type:
    """A dataclass of ``kind``'s fields, frozen as it is, with the ``__init__`` dataclass makes."""
    fields = [
        (field.name, Any, dataclasses.field(default=field.default))
        if field.default is not dataclasses.MISSING
        else (field.name, Any)
        for field in dataclasses.fields(kind)
    ]
    return dataclasses.make_dataclass(kind.__name__, fields, frozen=_frozen(kind))


def _values(value: Any) -> list[Any]:
    return [getattr(value, field.name) for field in dataclasses.fields(value)]


@pytest.mark.parametrize("kind", list(_ARGUMENTS), ids=lambda kind: kind.__name__)
@given(data=st.data())
def test_the_written_init_sets_what_the_generated_one_sets(kind: type, data: Any) -> None:
    arguments = data.draw(_ARGUMENTS[kind])
    names = [field.name for field in dataclasses.fields(kind)]
    # Any number of the trailing arguments that have a default left out.
    required = sum(
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        for field in dataclasses.fields(kind)
    )
    given_count = data.draw(st.integers(required, len(arguments)))
    arguments = arguments[:given_count]
    reference = _generated(kind)
    by_position = kind(*arguments)
    assert _values(by_position) == _values(reference(*arguments))
    by_name = kind(**dict(zip(names, arguments, strict=False)))
    assert _values(by_name) == _values(by_position)
    assert by_name == by_position
    if _frozen(kind):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(by_position, names[0], getattr(by_position, names[0]))
    with pytest.raises(TypeError):
        kind(*arguments, *([None] * (len(names) - given_count + 1)))
