"""The simulator under abuse: deep nesting answers, the request log stays bounded."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.simulator.conftest import StartSimulator


def _deep_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize("tool_choice", ["auto", "required"])
@pytest.mark.parametrize("stream", [False, True])
def test_deeply_nested_requests_get_answers_not_500s(
    start_simulator: StartSimulator, tool_choice: str, stream: bool
) -> None:
    sim = start_simulator()
    # 600 levels of JSON: past orjson's 254 and near Python's recursion limit.
    tool = {"type": "function", "function": {"name": "t", "parameters": _deep_schema(300)}}
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [tool],
        "tool_choice": tool_choice,
        "stream": stream,
    }
    raw = json.dumps(body).encode()
    reply = httpx.post(
        sim.openai_url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text[:300]


def test_a_deep_invalid_tool_choice_is_a_400(start_simulator: StartSimulator) -> None:
    sim = start_simulator()
    nested: Any = []
    for _ in range(400):
        nested = [nested]
    raw = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "t"}}],
            "tool_choice": nested,
        }
    ).encode()
    reply = httpx.post(
        sim.openai_url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tool_choice"


def test_the_request_log_is_bounded(start_simulator: StartSimulator) -> None:
    sim = start_simulator(request_log=5)
    with httpx.Client(base_url=sim.openai_url, timeout=10) as client:
        for i in range(12):
            body = {"model": "m", "messages": [{"role": "user", "content": f"question {i}"}]}
            assert client.post("/chat/completions", json=body).status_code == 200
    assert len(sim.requests) == 5
    assert [r.body["messages"][0]["content"] for r in sim.requests] == [
        f"question {i}" for i in range(7, 12)
    ]
