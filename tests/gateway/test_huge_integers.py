"""Issue 23, item 6: an integer longer than Python's ``json.loads`` takes (4,300
digits) is a string of its digits everywhere (docs/formats.md): in ``arguments``,
in ``arguments_json``, through the gateway to the openai SDK, and to an HTTP tool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.support import gateway
from tests.tools.service import Service
from toolrelay import StreamParser, parse_tool_calls
from toolrelay.events import ToolCallEnd
from toolrelay.repair import INT_DIGITS
from toolrelay.simulator import Simulator, SimulatorConfig

HUGE = "7" * 5000
TOOL = {
    "type": "function",
    "function": {
        "name": "store",
        "parameters": {"type": "object", "properties": {"n": {}, "label": {"type": "string"}}},
    },
}


def text_call(number: str) -> str:
    arguments = f'{{"n": {number}, "label": "x"}}'
    return f'[TOOL_CALL]{{"name": "store", "arguments": {arguments}}}[/TOOL_CALL]'


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    scenario = {
        "rules": [
            {"match": {"tool_result": "."}, "answer": {"content": "stored"}},
            {"answer": {"content": text_call(HUGE)}},
        ]
    }
    with Simulator(SimulatorConfig.load(scenario)) as running:
        yield running


def test_the_openai_sdk_gets_arguments_json_loads_reads(sim: Simulator) -> None:
    with gateway(sim.openai_url, tool_mode="rescue") as gw:
        client = gw.client()
        reply = client.chat.completions.create(
            model="toolrelay-sim", messages=[{"role": "user", "content": "go"}], tools=[TOOL]
        )
        (call,) = reply.choices[0].message.tool_calls or []
        assert json.loads(call.function.arguments) == {"n": HUGE, "label": "x"}
        streamed = ""
        for chunk in client.chat.completions.create(
            model="toolrelay-sim",
            messages=[{"role": "user", "content": "go"}],
            tools=[TOOL],
            stream=True,
        ):
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                streamed += (delta.function and delta.function.arguments) or ""
        assert json.loads(streamed) == {"n": HUGE, "label": "x"}


def test_an_http_tool_given_one_sends_it_as_a_string(sim: Simulator, tmp_path: Path) -> None:
    with Service() as service:
        path = tmp_path / "tools.json"
        store = {**TOOL["function"], "url": service.url + "/store", "method": "POST"}
        path.write_text(json.dumps([store]), encoding="utf-8")
        with gateway(sim.openai_url, tool_mode="rescue", tools_file=str(path)) as gw:
            reply = gw.client().chat.completions.create(
                model="toolrelay-sim", messages=[{"role": "user", "content": "go"}]
            )
        assert reply.choices[0].message.content == "stored"
        assert json.loads(service.recorder.last.body) == {"n": HUGE, "label": "x"}


def _finished_and_streamed(text: str) -> list[tuple[dict[str, Any], str]]:
    tools = [TOOL]
    finished = [(c.arguments, c.arguments_json) for c in parse_tool_calls(text, tools).calls]
    parser = StreamParser(tools)
    events = [*parser.feed(text), *parser.close()]
    ends = [event.call for event in events if isinstance(event, ToolCallEnd)]
    streamed = [(call.arguments, call.arguments_json) for call in ends]
    assert streamed == finished
    return finished


@settings(max_examples=30, deadline=None)
@given(digits=st.integers(min_value=1, max_value=INT_DIGITS + 50), negative=st.booleans())
def test_every_integer_is_json_serialisable_and_loads_at_default_limits(
    digits: int, negative: bool
) -> None:
    number = ("-" if negative else "") + "9" * digits
    ((arguments, arguments_json),) = _finished_and_streamed(text_call(number))
    json.dumps(arguments)  # no Decimal, nothing json cannot write
    assert json.loads(arguments_json) == arguments
    expected: Any = int(number) if digits <= INT_DIGITS else number
    assert arguments["n"] == expected
