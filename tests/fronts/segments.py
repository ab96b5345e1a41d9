"""Parser event sequences as a model writes them: text, reasoning and calls, any chunking."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import strategies as st

from toolrelay.events import (
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)

arguments = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.one_of(st.text(max_size=12), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none()),
    max_size=3,
)
segments = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.text(max_size=30)),
        st.tuples(st.just("reasoning"), st.text(max_size=30)),
        st.tuples(st.just("call"), arguments),
    ),
    max_size=6,
)


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def events_of(plan: list[tuple[str, Any]], cuts: list[int]) -> list[Event]:
    """The parser's events for ``plan``, each text cut at ``cuts``."""
    out: list[Event] = []
    calls = 0
    for kind, value in plan:
        if kind == "text":
            out += [ContentDelta(piece) for piece in _pieces(value, cuts)]
        elif kind == "reasoning":
            out += [ReasoningDelta(piece) for piece in _pieces(value, cuts)]
        else:
            text = orjson.dumps(value).decode()
            call = ToolCall(
                id=f"call_{calls}", name="get_weather", arguments=value, arguments_json=text
            )
            out.append(ToolCallStart(calls, call.id, call.name))
            out += [ToolCallArgumentsDelta(calls, piece) for piece in _pieces(text, cuts)]
            out.append(ToolCallEnd(calls, call))
            calls += 1
    return out
