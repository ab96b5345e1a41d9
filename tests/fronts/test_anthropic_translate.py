"""The Anthropic front's pure halves: the request reader and the message builder."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.rules import check_messages_stream
from tests.fronts.segments import events_of, segments
from tests.fronts.support import ANTHROPIC_TOOL
from toolrelay.io.round import Finish
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic import estimate_tokens
from toolrelay.server.anthropic.request import read_messages
from toolrelay.server.anthropic.wire import MessageBuilder, MessageEncoder
from toolrelay.server.errors import APIError

SETTINGS = Settings()
AUDIO = {"type": "audio"}
LIST_INPUT = {"type": "tool_use", "id": "a", "name": "f", "input": []}


def _read(**body: Any) -> Any:
    return read_messages({"model": "m", "max_tokens": 50, **body}, SETTINGS, None, "Bearer k")


def test_a_whole_history_becomes_chat_messages() -> None:
    turn = _read(
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Oslo?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"c": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "timeout",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Try again."},
                ],
            },
            {"role": "assistant", "content": "Sure."},
        ],
        tools=[ANTHROPIC_TOOL],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        stop_sequences=["END"],
        metadata={"user_id": "u"},
    )
    body = turn.round.body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Oslo?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"c":1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: timeout"},
        {"role": "user", "content": "Try again."},
        {"role": "assistant", "content": "Sure."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": ANTHROPIC_TOOL["input_schema"],
                "description": ANTHROPIC_TOOL["description"],
            },
        }
    ]
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert body["stop"] == ["END"] and body["max_tokens"] == 50
    assert "metadata" not in body and "stream_options" not in body
    assert turn.round.auth == "Bearer k" and turn.thinking is False and turn.stream is False


def test_streams_ask_for_usage_and_thinking_is_read() -> None:
    turn = _read(
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert turn.stream and turn.thinking
    assert turn.round.body["stream_options"] == {"include_usage": True}
    assert _read(messages=[{"role": "user", "content": "hi"}], thinking={"type": "disabled"})
    assert not _read(
        messages=[{"role": "user", "content": "hi"}], thinking={"type": "disabled"}
    ).thinking


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
            "messages.0.content.0.type",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "a", "name": "f", "input": []}],
                    }
                ]
            },
            "messages.0.content.0.input",
        ),
        ({"tools": [{"name": "f"}]}, "tools.0.input_schema"),
        ({"tool_choice": {"type": "sometimes"}}, "tool_choice"),
        ({"system": 3}, "system"),
        ({"max_tokens": True}, "max_tokens"),
        ({"thinking": {"type": "lots"}}, "thinking"),
    ],
)
def test_bad_fields_are_named(body: dict[str, Any], field: str) -> None:
    full = {"messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(APIError) as error:
        _read(**full)
    assert error.value.status == 400 and error.value.param == field
    assert error.value.message.startswith(field)


def test_a_choice_of_an_undeclared_tool_is_refused() -> None:
    with pytest.raises(APIError) as error:
        _read(
            messages=[{"role": "user", "content": "hi"}],
            tools=[ANTHROPIC_TOOL],
            tool_choice={"type": "tool", "name": "nope"},
        )
    assert error.value.status == 400 and "nope" in error.value.message


def test_token_estimate_grows_with_the_request() -> None:
    small = _read(messages=[{"role": "user", "content": "hi"}], counting=True)
    large = _read(messages=[{"role": "user", "content": "word " * 100}], tools=[ANTHROPIC_TOOL])
    assert estimate_tokens(small.round.body) < 5
    assert 120 < estimate_tokens(large.round.body) < 200


@settings(max_examples=200, deadline=None)
@given(plan=segments, cuts=st.lists(st.integers(0, 40), max_size=4), thinking=st.booleans())
def test_stream_and_message_agree(plan: list[Any], cuts: list[int], thinking: bool) -> None:
    events = events_of(plan, cuts)
    finish = Finish("stop", {"prompt_tokens": 5, "completion_tokens": 7})
    encoder = MessageEncoder("m", thinking)
    raw = encoder.start()
    for event in events:
        raw += encoder.event(event) or b""
    raw += encoder.finish(finish, {})
    streamed = check_messages_stream(raw)
    built = MessageBuilder("m", thinking)
    for event in events:
        built.event(event)
    built.finish(finish, {})
    message = orjson.loads(orjson.dumps(built.message))
    assert streamed.model_dump(exclude_none=True, exclude={"id"}) == {
        key: value for key, value in message.items() if key != "id" and value is not None
    }
    kinds = [block["type"] for block in message["content"]]
    # Blank text moves or goes; every other character stays, in order.
    written = "".join(text for kind, text in plan if kind == "text")
    answered = "".join(block["text"] for block in message["content"] if block["type"] == "text")
    assert "".join(written.split()) == "".join(answered.split())
    assert kinds.count("tool_use") == sum(kind == "call" for kind, _ in plan)
    if not thinking:
        assert "thinking" not in kinds
    assert message["stop_reason"] == ("tool_use" if "tool_use" in kinds else "end_turn")
    assert message["usage"] == {"input_tokens": 5, "output_tokens": 7}
