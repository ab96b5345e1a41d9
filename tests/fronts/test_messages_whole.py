"""A non-streamed Messages answer is made whole at once (``whole_message``): held
here to the general path it skips, the reply replayed as events through the
stream's builder and then finished, byte for byte, for generated replies (text
with blanks at either end, reasoning with thinking on and off, calls with their
JSON or none, rejected calls, usage of every shape, stop sequences, every finish
reason) and toolrelay's own keys."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.events import RejectedCall, ToolCall
from toolrelay.io.round import Finish, Reply, reply_events
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic import MessagesFront
from toolrelay.server.anthropic.request import MessagesTurn, read_messages
from toolrelay.server.anthropic.wire import MessageBuilder

SETTINGS = Settings()
# Blanks at either end of a text are held back by the builder: ASCII ones and
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


@st.composite
def calls(draw: st.DrawFn) -> ToolCall:
    arguments = draw(ARGUMENTS)
    # As a parser hands it out: the arguments' strict JSON (or, rarely, none).
    written = draw(st.sampled_from([orjson.dumps(arguments).decode(), ""]))
    return ToolCall(draw(TEXT), draw(st.sampled_from(["get_weather", "f", ""])), arguments, written)


REJECTED = st.builds(RejectedCall, st.none() | TEXT, TEXT, TEXT)
REPLIES = st.builds(
    Reply,
    content=st.none() | TEXT,
    reasoning=st.none() | TEXT,
    calls=st.lists(calls(), max_size=3),
    finish_reason=REASONS,
    usage=USAGE,
    mode=st.sampled_from(["native", "rescue"]),
    warning=st.none() | TEXT,
    rejected=st.lists(REJECTED, max_size=2),
    stop_sequence=st.none() | TEXT,
)
EXTRA = st.fixed_dictionaries(
    {}, optional={"toolrelay_warning": TEXT, "toolrelay_stuck": st.just({"stuck": True})}
)
THINKING = st.sampled_from(
    [None, {"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"}, {"type": "disabled"}]
)


def builders_message(turn: MessagesTurn, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
    """The general path: the reply's events through the stream's builder, then its finish."""
    builder = MessageBuilder(turn.round.model, turn.thinking)
    for event in reply_events(reply):
        builder.event(event)
    builder.finish(Finish(reply.finish_reason, reply.usage, None, reply.stop_sequence), extra)
    return builder.message


def written(message: dict[str, Any]) -> bytes:
    """The message's JSON, its id (one drawn per message) left out of the comparison."""
    assert message["id"].startswith("msg_")
    return orjson.dumps({**message, "id": "msg_"})


@settings(max_examples=500, deadline=None)
@given(REPLIES, EXTRA, THINKING)
def test_the_whole_message_is_the_builders(
    reply: Reply, extra: dict[str, Any], thinking: dict[str, Any] | None
) -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
    }
    if thinking is not None:
        body["thinking"] = thinking
    turn = read_messages(body, SETTINGS)
    general = written(builders_message(turn, reply, dict(extra)))
    assert written(MessagesFront(SETTINGS).answer(turn, reply, dict(extra))) == general
