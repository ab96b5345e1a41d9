"""The Responses front's pure halves: the request reader, the builder and the store."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.rules import check_responses_stream
from tests.fronts.segments import events_of, segments
from tests.fronts.support import RESPONSES_TOOL
from toolrelay.events import ToolCall
from toolrelay.io.round import Finish, Reply
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic import MessagesFront
from toolrelay.server.anthropic.request import read_messages
from toolrelay.server.errors import APIError
from toolrelay.server.responses import ResponsesFront
from toolrelay.server.responses.request import read_responses
from toolrelay.server.responses.store import ResponseStore
from toolrelay.server.responses.wire import ResponseBuilder

SETTINGS = Settings()


def _read(kept: ResponseStore | None = None, **body: Any) -> Any:
    return read_responses({"model": "m", **body}, SETTINGS, kept or ResponseStore(4))


def test_items_become_chat_messages() -> None:
    turn = _read(
        instructions="Be brief.",
        input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
            },
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": ""},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "sun"}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "And this?"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                ],
            },
        ],
        tools=[RESPONSES_TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        max_output_tokens=99,
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
    )
    body = turn.round.body
    calls = [
        {"id": c, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        for c in ("c1", "c2")
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Looking.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "tool", "tool_call_id": "c2", "content": "sun"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": RESPONSES_TOOL["description"],
                "parameters": RESPONSES_TOOL["parameters"],
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False and body["max_tokens"] == 99
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "w", "schema": {"type": "object"}},
    }
    # Kept, as by default: the echo leaves the response's default as it is.
    assert turn.echo["max_output_tokens"] == 99 and "store" not in turn.echo
    assert turn.history == body["messages"][1:]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": 3}, "input"),
        ({"input": [{"type": "telepathy_call", "id": "x"}]}, "input[0].type"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_file"}]}]}, "input[0].content[0]"),
        ({"input": "x", "tools": [{"type": "namespace", "tools": []}]}, "tools[0].name"),
        ({"input": "x", "tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": "x", "previous_response_id": "resp_nope"}, "previous_response_id"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format"),
        ({"input": "x", "max_output_tokens": "9"}, "max_output_tokens"),
    ],
)
def test_bad_fields_are_named(body: dict[str, Any], param: str) -> None:
    with pytest.raises(APIError) as error:
        _read(**body)
    assert error.value.status == 400 and error.value.param == param


def test_custom_tools_are_functions_taking_text() -> None:
    tool = {"type": "custom", "name": "apply_patch", "description": "Patch files."}
    turn = _read(
        input=[
            {"role": "user", "content": "fix it"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "P"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        ],
        tools=[tool, {**tool, "name": "plain", "format": {"type": "text"}}],
        tool_choice={"type": "custom", "name": "apply_patch"},
    )
    body = turn.round.body
    assert turn.custom == {"apply_patch", "plain"}
    assert body["tools"][0]["function"]["parameters"]["required"] == ["input"]
    assert body["tools"][0]["function"]["description"] == "Patch files."
    assert body["tool_choice"] == {"type": "function", "function": {"name": "apply_patch"}}
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"input":"P"}'
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    with pytest.raises(APIError) as error:
        _read(input="x", tools=[{**tool, "format": {"type": "grammar"}}])
    assert error.value.param == "tools[0].format.definition"


def test_store_is_bounded_and_can_be_off() -> None:
    store = ResponseStore(2)
    for n in range(3):
        store.put({"id": f"resp_{n}", "output": []}, [{"role": "user", "content": str(n)}])
    assert store.get("resp_0") is None and store.get("resp_2") is not None
    with pytest.raises(APIError) as error:
        _read(ResponseStore(0), input="x", store=True)
    assert error.value.param == "store"
    assert _read(ResponseStore(0), input="x").store is False


def test_a_follow_up_starts_from_the_stored_conversation() -> None:
    store = ResponseStore(4)
    front = ResponsesFront(SETTINGS, store)
    first = read_responses(
        {"model": "m", "input": "hi", "instructions": "Be brief."}, SETTINGS, store
    )
    call = ToolCall("c1", "get_weather", {"city": "Oslo"}, '{"city":"Oslo"}')
    answer = front.answer(first, Reply("Looking.", None, [call], "tool_calls", None, "native"), {})
    follow = _read(
        store,
        previous_response_id=answer["id"],
        input=[{"type": "function_call_output", "call_id": "c1", "output": "rain"}],
    )
    assert follow.round.body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
    ]


def test_arguments_beyond_64_bits_are_answered() -> None:
    big = '{"n": 123456789012345678901234567890}'
    call = ToolCall("c1", "f", {"n": 123456789012345678901234567890}, big)
    reply = Reply(None, None, [call], "tool_calls", None, "native")
    store = ResponseStore(4)
    response = ResponsesFront(SETTINGS, store).answer(_read(store, input="x"), reply, {})
    assert orjson.loads(orjson.dumps(response))["output"][0]["arguments"] == big
    turn = read_messages(
        {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]}, SETTINGS
    )
    message = MessagesFront(SETTINGS).answer(turn, reply, {})
    assert b"123456789012345678901234567890" in orjson.dumps(message)


@settings(max_examples=200, deadline=None)
@given(
    plan=segments,
    cuts=st.lists(st.integers(0, 40), max_size=4),
    reasoning=st.booleans(),
    reason=st.sampled_from(["stop", "length", "tool_calls"]),
    custom=st.booleans(),
)
def test_stream_and_response_agree(
    plan: list[Any], cuts: list[int], reasoning: bool, reason: str, custom: bool
) -> None:
    events = events_of(plan, cuts)
    finish = Finish(reason, {"prompt_tokens": 3, "completion_tokens": 4})
    echo = _read(input="x").echo
    builder = ResponseBuilder("m", echo, reasoning, frozenset({"get_weather"} if custom else ()))
    raw = builder.start()
    for event in events:
        raw += builder.stream_event(event) or b""
    raw += builder.finish_bytes(finish, {"toolrelay_warning": "w"})
    streamed = check_responses_stream(raw)
    final = orjson.loads(orjson.dumps(builder.response))
    assert streamed.model_dump(mode="json", exclude_unset=True) == final
    assert final["toolrelay_warning"] == "w"
    kinds = [item["type"] for item in final["output"]]
    call = "custom_tool_call" if custom else "function_call"
    assert kinds.count(call) == sum(kind == "call" for kind, _ in plan)
    assert reasoning or "reasoning" not in kinds
    assert final["status"] == ("incomplete" if reason == "length" else "completed")
    assert final["usage"]["total_tokens"] == 7
