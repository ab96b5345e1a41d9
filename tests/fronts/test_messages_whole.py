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

from tests.fronts.replies import EXTRA, replies
from toolrelay.io.round import Finish, Reply, reply_events
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic import MessagesFront
from toolrelay.server.anthropic.request import MessagesTurn, read_messages
from toolrelay.server.anthropic.wire import MessageBuilder

SETTINGS = Settings()
REPLIES = replies(["get_weather", "f", ""])
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
