"""Nothing a client sends crashes the gateway or gets a 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.support import TIME_TOOL, GatewayServer, stack
from tests.strategies import json_trees
from tests.weather import WEATHER_TOOL

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = json_trees(
    scalars,
    st.text(max_size=8),
    leaves=12,
    width=4,
    object_width=4,
)
roles = st.sampled_from(["system", "user", "assistant", "tool", "developer", "robot", None])
messages = st.lists(
    st.fixed_dictionaries(
        {"role": roles},
        optional={
            "content": st.one_of(st.text(max_size=40), json_values),
            "tool_calls": st.one_of(
                json_values,
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "id": st.one_of(st.text(max_size=6), json_values),
                            "type": st.just("function"),
                            "function": st.fixed_dictionaries(
                                {
                                    "name": st.one_of(st.just("get_weather"), json_values),
                                    "arguments": st.one_of(st.text(max_size=20), json_values),
                                }
                            ),
                        }
                    ),
                    max_size=2,
                ),
            ),
            "tool_call_id": st.one_of(st.text(max_size=8), json_values),
            "name": json_values,
        },
    ),
    max_size=4,
)
tool_choices = st.one_of(
    st.sampled_from(["auto", "none", "required", "bogus"]),
    st.just({"type": "function", "function": {"name": "get_weather"}}),
    json_values,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.just("toolrelay-sim"), json_values),
        "messages": st.one_of(messages, json_values),
        "tools": st.one_of(st.just([WEATHER_TOOL, TIME_TOOL]), json_values),
        "tool_choice": tool_choices,
        "parallel_tool_calls": json_values,
        "stream": st.one_of(st.booleans(), json_values),
        "stream_options": json_values,
        "temperature": json_values,
        "max_tokens": json_values,
        "n": json_values,
        "toolrelay_profile": st.one_of(st.sampled_from(["graded", "antiloop"]), json_values),
        "toolrelay_stuck_mode": st.one_of(st.sampled_from(["observe", "off"]), json_values),
    },
)


# Bodies that pass the checks, to reach the rounds themselves: any history
# shape the validator admits, any tool_choice, streaming or not.
call_entries = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(max_size=6),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["get_weather", "get_time", "nope", ""]),
                    "arguments": st.one_of(
                        st.text(max_size=20), st.just('{"city": "Oslo"}'), st.just("{")
                    ),
                }
            ),
        }
    ),
    min_size=1,
    max_size=2,
)
history = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["system", "developer", "user"]),
                "content": st.text(max_size=30),
            }
        ),
        st.fixed_dictionaries(
            {"role": st.just("assistant"), "content": st.none() | st.text(max_size=30)},
            optional={"tool_calls": call_entries},
        ),
        st.fixed_dictionaries(
            {"role": st.just("tool"), "content": st.text(max_size=30)},
            optional={"tool_call_id": st.text(max_size=6)},
        ),
        st.fixed_dictionaries(
            {
                "role": st.just("user"),
                "content": st.lists(
                    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
                    max_size=2,
                ),
            }
        ),
    ),
    min_size=1,
    max_size=6,
)
valid_bodies = st.fixed_dictionaries(
    {"model": st.just("toolrelay-sim"), "messages": history},
    optional={
        "tools": st.just([WEATHER_TOOL, TIME_TOOL]),
        "tool_choice": st.sampled_from(
            ["auto", "none", "required", {"type": "function", "function": {"name": "get_time"}}]
        ),
        "parallel_tool_calls": st.booleans(),
        "stream": st.booleans(),
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    },
)


@pytest.fixture(scope="module", params=["native", "rescue"])
def gw(request: pytest.FixtureRequest) -> Iterator[GatewayServer]:
    settings = {"backend_kind": "openai", "tool_mode": request.param}
    with stack(gateway_settings=settings) as (_, server):
        yield server


@pytest.fixture(scope="module")
def http(gw: GatewayServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=20) as client:
        yield client


def _check(http: httpx.Client, content: bytes) -> None:
    with http.stream("POST", "/v1/chat/completions", content=content) as response:
        raw = response.read()
    assert response.status_code < 500, raw
    assert response.headers["x-request-id"]
    if response.status_code >= 400:
        error = orjson.loads(raw)["error"]
        assert isinstance(error["message"], str)
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert b"data: [DONE]" in raw or b'data: {"error"' in raw
    else:
        assert orjson.loads(raw)["object"] == "chat.completion"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_structured_bodies(http: httpx.Client, body: dict[str, Any]) -> None:
    _check(http, orjson.dumps(body))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.one_of(st.binary(max_size=64), json_values.map(orjson.dumps)))
def test_arbitrary_bytes(http: httpx.Client, raw: bytes) -> None:
    _check(http, raw)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=valid_bodies)
def test_admissible_bodies(http: httpx.Client, body: dict[str, Any]) -> None:
    _check(http, orjson.dumps(body))
