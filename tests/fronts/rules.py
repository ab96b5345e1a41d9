"""The stream rules of docs/anthropic-messages.md and docs/openai-responses.md, as checks.

Each checker takes a raw SSE body, checks every rule the SDKs rely on, runs
the SDK's own accumulator over the events, and returns what it built.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args, get_origin

import orjson
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from jiter import from_json
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

_ANTHROPIC_EVENT: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
_RESPONSES_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def _models_by_type(union: Any) -> dict[str, Any]:
    """The SDK's event model for each event type (a plain union, validated one by one)."""
    while get_origin(union) is Annotated:
        union = get_args(union)[0]
    return {get_args(model.model_fields["type"].annotation)[0]: model for model in get_args(union)}


_RESPONSES_MODELS = _models_by_type(ResponseStreamEvent)
_DELTA_FOR = {"text": "text_delta", "tool_use": "input_json_delta", "thinking": "thinking_delta"}
_STOP_REASONS = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"}


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, decoded data) per server-sent event; comment lines skipped."""
    out = []
    for block in raw.decode().split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            out.append((name, orjson.loads("\n".join(data))))
    return out


def check_messages_stream(raw: bytes) -> Message:
    """The message a well-formed Anthropic Messages stream builds."""
    events = []
    for name, data in sse_events(raw):
        # The SDK skips events without a name, and reads pings and errors by it.
        assert name == data["type"], (name, data)
        assert name != "error", data
        if name != "ping":
            _ANTHROPIC_EVENT.validate_python(data)
            events.append(data)
    assert events[0]["type"] == "message_start", events[0]
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"], events[-2:]
    assert events[-2]["delta"]["stop_reason"] in _STOP_REASONS
    open_block: dict[str, Any] | None = None
    index = -1
    fragments: list[str] = []
    for event in events[1:-2]:
        kind = event["type"]
        if kind == "content_block_start":
            assert open_block is None, "blocks never interleave"
            index += 1
            assert event["index"] == index
            open_block = event["content_block"]
            fragments = []
        elif kind == "content_block_delta":
            assert open_block is not None and event["index"] == index
            delta = event["delta"]
            assert delta["type"] == _DELTA_FOR[open_block["type"]], (open_block, delta)
            if delta["type"] == "input_json_delta":
                fragments.append(delta["partial_json"])
                # The SDK parses the input so far after every fragment.
                from_json("".join(fragments).encode(), partial_mode=True)
        else:
            assert kind == "content_block_stop" and event["index"] == index, event
            assert open_block is not None
            if open_block["type"] == "tool_use":
                assert orjson.loads("".join(fragments) or "{}") is not None
            open_block = None
    assert open_block is None
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    assert snapshot is not None
    for block in snapshot.content:
        if block.type == "text":
            assert block.text and block.text == block.text.strip(), block
    message = Message.model_validate(snapshot.model_dump())
    for block in message.content:
        if block.type == "tool_use":
            assert isinstance(block.input, dict)
    return message


def check_responses_stream(raw: bytes) -> Response:
    """The response a well-formed Responses stream builds (completed, incomplete or failed)."""
    events = []
    for name, data in sse_events(raw):
        assert name == data["type"], (name, data)
        _RESPONSES_MODELS[name].model_validate(data)
        events.append(data)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    response_id = events[0]["response"]["id"]
    last = events[-1]
    terminal = ("response.completed", "response.incomplete", "response.failed")
    assert last["type"] in terminal, last
    items: list[dict[str, Any]] = []
    item: dict[str, Any] | None = None
    pieces: list[str] = []
    for event in events[2:-1]:
        kind = event["type"]
        if "response" in event:
            assert event["response"]["id"] == response_id
        if kind == "response.output_item.added":
            assert item is None, "items never interleave"
            assert event["output_index"] == len(items)
            item = event["item"]
            assert item.get("status", "in_progress") == "in_progress"
            pieces = []
            continue
        assert item is not None, event
        assert event["output_index"] == len(items)
        if kind != "response.output_item.done":
            assert event["item_id"] == item["id"]
        if kind == "response.content_part.added":
            assert item["type"] in ("message", "reasoning") and not pieces
        elif kind == "response.reasoning_summary_part.added":
            assert item["type"] == "reasoning" and not pieces and event["summary_index"] == 0
        elif kind in (
            "response.output_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_summary_text.delta",
        ):
            pieces.append(event["delta"])
        elif kind == "response.function_call_arguments.delta":
            assert item["type"] == "function_call"
            pieces.append(event["delta"])
        elif kind in (
            "response.output_text.done",
            "response.reasoning_text.done",
            "response.reasoning_summary_text.done",
        ):
            assert event["text"] == "".join(pieces)
        elif kind == "response.reasoning_summary_part.done":
            assert event["part"]["text"] == "".join(pieces)
        elif kind == "response.custom_tool_call_input.delta":
            assert item["type"] == "custom_tool_call"
            pieces.append(event["delta"])
        elif kind == "response.custom_tool_call_input.done":
            assert event["input"] == "".join(pieces)
        elif kind == "response.function_call_arguments.done":
            assert event["arguments"] == "".join(pieces) or (not pieces and event["arguments"])
            orjson.loads(event["arguments"])
        elif kind == "response.output_item.done":
            done = event["item"]
            assert (done["id"], done["type"]) == (item["id"], item["type"])
            assert done.get("status", "completed") == "completed"
            if done["type"] in ("function_call", "custom_tool_call"):
                assert done["call_id"] == item["call_id"]
            items.append(done)
            item = None
        else:
            assert kind == "response.content_part.done", event
    final = last["response"]
    assert final["id"] == response_id
    if last["type"] != "response.failed":
        assert item is None
        assert final["output"] == items
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=omit)
    for event in events:
        state.handle_event(_RESPONSES_EVENT.validate_python(event))
    if last["type"] == "response.completed":
        assert state._completed_response is not None
        assert state._completed_response.id == response_id
    return Response.model_validate(final)
