"""Finished replies as a round hands them to a front: text with blanks at either
end, reasoning, calls with their JSON or none, rejected calls, usage of every
shape, every finish reason, and toolrelay's own keys beside them."""

from __future__ import annotations

import orjson
from hypothesis import strategies as st

from toolrelay.events import RejectedCall, ToolCall
from toolrelay.io.round import Reply

# Blanks at either end of a text are held back by the builders: ASCII ones and
# those beyond that ``str.strip`` strips too, and one (``\u200b``) it does not.
TEXT = st.text(
    alphabet=st.sampled_from(list(' \n\t\x1c\x85\xa0\u3000\u200bab"é{')), max_size=8
) | st.text(max_size=8)
INT = st.integers(-(2**63), 2**64 - 1)
VALUE = st.none() | st.booleans() | INT | TEXT | st.lists(INT, max_size=2)
ARGUMENTS = st.dictionaries(st.sampled_from(["input", "city", "n"]), VALUE, max_size=3)
COUNT = st.none() | st.integers(0, 10**6) | st.booleans() | st.text(max_size=2)
USAGE = st.none() | st.fixed_dictionaries(
    {}, optional={"prompt_tokens": COUNT, "completion_tokens": COUNT, "total_tokens": COUNT}
)
REASONS = st.sampled_from(["stop", "length", "tool_calls", "content_filter", "function_call", "x"])
REJECTED = st.builds(RejectedCall, st.none() | TEXT, TEXT, TEXT)
# toolrelay's own keys of a finish.
EXTRA = st.fixed_dictionaries(
    {}, optional={"toolrelay_warning": TEXT, "toolrelay_stuck": st.just({"stuck": True})}
)


@st.composite
def calls(draw: st.DrawFn, names: list[str]) -> ToolCall:
    arguments = draw(ARGUMENTS)
    # As a parser hands it out: the arguments' strict JSON (or, rarely, none).
    written = draw(st.sampled_from([orjson.dumps(arguments).decode(), ""]))
    return ToolCall(draw(TEXT), draw(st.sampled_from(names)), arguments, written)


def replies(names: list[str]) -> st.SearchStrategy[Reply]:
    """Finished replies whose calls name one of ``names``."""
    return st.builds(
        Reply,
        content=st.none() | TEXT,
        reasoning=st.none() | TEXT,
        calls=st.lists(calls(names), max_size=3),
        finish_reason=REASONS,
        usage=USAGE,
        mode=st.sampled_from(["native", "rescue"]),
        warning=st.none() | TEXT,
        rejected=st.lists(REJECTED, max_size=2),
        stop_sequence=st.none() | TEXT,
    )
