"""Nothing a client sends to /v1/messages or /v1/responses crashes the gateway or gets
a 500; every error has the front's own shape, and every stream the SDKs' rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fronts.rules import check_messages_stream, check_responses_stream
from tests.fronts.support import ANTHROPIC_TOOL, RESPONSES_TOOL
from tests.gateway.support import GatewayServer
from tests.gateway.test_fuzz import json_values

texts = st.sampled_from(["hi", "What's the weather in Oslo?", "think", "long", ""])

# --- Anthropic ------------------------------------------------------------------

blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(texts, json_values)}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.one_of(st.just("toolu_1"), json_values),
            "name": st.one_of(st.just("get_weather"), json_values),
            "input": st.one_of(st.just({"city": "Oslo"}), json_values),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": st.one_of(st.just("toolu_1"), json_values),
        },
        optional={
            "content": st.one_of(texts, json_values),
            "is_error": st.one_of(st.booleans(), json_values),
        },
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["thinking", "image", "document", "bogus"])}),
    json_values,
)
anthropic_messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.one_of(st.sampled_from(["user", "assistant"]), json_values),
            "content": st.one_of(texts, st.lists(blocks, max_size=3), json_values),
        }
    ),
    max_size=4,
)
anthropic_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just("toolrelay-sim"), json_values),
        "max_tokens": st.one_of(st.just(64), json_values),
        "messages": st.one_of(anthropic_messages, json_values),
        "system": st.one_of(texts, json_values),
        "tools": st.one_of(st.just([ANTHROPIC_TOOL]), json_values),
        "tool_choice": st.one_of(
            st.sampled_from([{"type": "auto"}, {"type": "any"}, {"type": "none"}]), json_values
        ),
        "thinking": st.one_of(st.just({"type": "enabled", "budget_tokens": 64}), json_values),
        "stop_sequences": json_values,
        "temperature": json_values,
        "stream": st.one_of(st.booleans(), json_values),
    },
)

# --- Responses -------------------------------------------------------------------

items = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.one_of(st.sampled_from(["user", "assistant", "system"]), json_values),
            "content": st.one_of(
                texts,
                st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["input_text", "bogus"]), "text": texts}
                    ),
                    max_size=2,
                ),
                json_values,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": st.one_of(st.just("call_1"), json_values),
            "name": st.one_of(st.just("get_weather"), json_values),
            "arguments": st.one_of(st.just('{"city": "Oslo"}'), json_values),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": st.one_of(st.just("call_1"), json_values),
            "output": st.one_of(texts, json_values),
        }
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["reasoning", "item_reference", "web"])}),
    json_values,
)
responses_bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just("toolrelay-sim"), json_values),
        "input": st.one_of(texts, st.lists(items, max_size=4), json_values),
        "instructions": st.one_of(texts, json_values),
        "tools": st.one_of(st.just([RESPONSES_TOOL]), json_values),
        "tool_choice": st.one_of(st.sampled_from(["auto", "required", "none"]), json_values),
        "reasoning": json_values,
        "text": json_values,
        "store": json_values,
        "previous_response_id": json_values,
        "max_output_tokens": json_values,
        "parallel_tool_calls": json_values,
        "stream": st.one_of(st.booleans(), json_values),
    },
)


@pytest.fixture(scope="module")
def http(pair: tuple[Any, GatewayServer]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=pair[1].url, timeout=20) as client:
        yield client


def _post(http: httpx.Client, path: str, content: bytes) -> httpx.Response:
    with http.stream("POST", path, content=content) as response:
        response.read()
    assert response.status_code < 500 or response.status_code == 502, response.content
    assert response.headers["x-request-id"]
    return response


def _check_messages(http: httpx.Client, content: bytes) -> None:
    response = _post(http, "/v1/messages", content)
    if response.status_code >= 400:
        body = orjson.loads(response.content)
        assert body["type"] == "error" and isinstance(body["error"]["message"], str)
    elif response.headers["content-type"].startswith("text/event-stream"):
        check_messages_stream(response.content)
    else:
        assert orjson.loads(response.content)["type"] == "message"


def _check_responses(http: httpx.Client, content: bytes) -> None:
    response = _post(http, "/v1/responses", content)
    if response.status_code >= 400:
        assert isinstance(orjson.loads(response.content)["error"]["message"], str)
    elif response.headers["content-type"].startswith("text/event-stream"):
        check_responses_stream(response.content)
    else:
        assert orjson.loads(response.content)["object"] == "response"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=anthropic_bodies)
def test_messages_bodies(http: httpx.Client, body: dict[str, Any]) -> None:
    _check_messages(http, orjson.dumps(body))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=responses_bodies)
def test_responses_bodies(http: httpx.Client, body: dict[str, Any]) -> None:
    _check_responses(http, orjson.dumps(body))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.one_of(st.binary(max_size=48), json_values.map(orjson.dumps)))
def test_arbitrary_bytes(http: httpx.Client, raw: bytes) -> None:
    _check_messages(http, raw)
    _check_responses(http, raw)
    count = _post(http, "/v1/messages/count_tokens", raw)
    assert count.status_code in (200, 400)
