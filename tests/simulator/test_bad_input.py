"""Nothing a client sends crashes the simulator; errors come in the right API's shape."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees

GOOD = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{nope", None),
        (b"", None),
        (b"[1, 2]", None),
        (b'"text"', None),
        ({"messages": GOOD["messages"]}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"content": "no role"}]}, "messages"),
        (GOOD | {"tools": {"not": "a list"}}, "tools"),
        (GOOD | {"tools": [{"type": "function"}]}, "tools"),
        (GOOD | {"tool_choice": "sometimes"}, "tool_choice"),
        (GOOD | {"stream": "yes"}, "stream"),
        (GOOD | {"stream_options": 3}, "stream_options"),
    ],
)
def test_openai_bad_requests(default_sim, wire, body: Any, param: str | None):
    http = wire.http(default_sim)
    if isinstance(body, bytes):
        response = http.post("/v1/chat/completions", content=body)
    else:
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]


@pytest.mark.parametrize(
    "body",
    [b"{nope", b"", b"[]", {"messages": GOOD["messages"]}, {"model": "m"}, GOOD | {"tools": 1}],
)
def test_ollama_bad_requests(default_sim, wire, body: Any):
    http = wire.http(default_sim)
    if isinstance(body, bytes):
        response = http.post("/api/chat", content=body)
    else:
        response = http.post("/api/chat", json=body)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert isinstance(response.json()["error"], str)


def test_unknown_paths_and_methods(default_sim, wire):
    http = wire.http(default_sim)
    missing = http.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert (http.get("/api/nothing").status_code, http.get("/api/nothing").json()) == (
        404,
        {"error": "Not Found"},
    )
    wrong_method = http.get("/v1/chat/completions")
    assert wrong_method.status_code == 405
    assert "error" in wrong_method.json()
    assert http.post("/api/show", content=b"{").json()["error"]


json_values = json_trees(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    st.text(max_size=8),
    leaves=8,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "model": json_values | st.just("m"),
        "messages": json_values
        | st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "tool", "system", "assistant"])},
                optional={"content": json_values, "tool_calls": json_values},
            ),
            max_size=3,
        ),
        "tools": json_values,
        "tool_choice": json_values,
        "stream": json_values,
        "stream_options": json_values,
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=request_like, path=st.sampled_from(["/v1/chat/completions", "/api/chat"]))
def test_fuzzed_bodies_never_crash(default_sim, wire, body: dict[str, Any], path: str):
    response = wire.http(default_sim).post(path, json=body)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert "error" in response.json()
