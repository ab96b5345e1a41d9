"""Scenario files and dicts: loading, validation, rule matching, placeholders, errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from toolrelay.simulator import ScenarioError, SimulatorConfig, default_scenario, load_scenario
from toolrelay.simulator.model import NO_RULE_TEXT

YAML_SCENARIO = """\
models: [qwen3:8b]
settings:
  chunk: 2
  strip_tools: true
rules:
  - name: greet
    match: {last_user: '(?i)^hello (?P<who>\\w+)'}
    answer: {content: "Hi {who}, from {model}."}
  - answer: {content: fallback}
"""


def ask(sim: Any, wire: Any, messages: list[Any], **extra: Any) -> dict[str, Any]:
    request = {"model": "m", "messages": messages, **extra}
    response = wire.http(sim).post("/v1/chat/completions", json=request)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body["choices"][0]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_yaml_file_with_settings(tmp_path: Path, start_simulator, wire):
    path = tmp_path / "scenario.yaml"
    path.write_text(YAML_SCENARIO)
    config = SimulatorConfig.load(path)
    assert (config.chunk, config.strip_tools) == (2, True)
    assert [m.name for m in config.scenario.models] == ["qwen3:8b"]
    sim = start_simulator(str(path))
    assert ask(sim, wire, user("Hello Ada"))["message"]["content"] == "Hi Ada, from m."
    assert ask(sim, wire, user("bye"))["message"]["content"] == "fallback"


def test_json_file_and_switches_override_settings(tmp_path: Path):
    path = tmp_path / "scenario.json"
    data = {"settings": {"chunk": 2, "delay_ms": 5}, "rules": [{"answer": {"content": "x"}}]}
    path.write_bytes(orjson.dumps(data))
    config = SimulatorConfig.load(path, chunk=7)
    assert (config.chunk, config.delay_ms) == (7, 5)


def test_default_scenario_is_shipped_and_valid():
    scenario = default_scenario()
    assert [rule.name for rule in scenario.rules][-1] == "plain-answer"
    assert SimulatorConfig().scenario is scenario


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "rules"),
        ({"rules": []}, "rules"),
        ({"rules": [{"answer": {"content": "x", "colour": "red"}}]}, "colour"),
        ({"rules": [{"match": {"last_user": "("}, "answer": {}}]}, "last_user"),
        ({"rules": [{"match": {"tools": "sometimes"}, "answer": {}}]}, "tools"),
        ({"rules": [{"match": {"last_user": "(?P<model>x)"}, "answer": {}}]}, "built-in"),
        ({"rules": [{"answer": {"content": "x", "error": {"status": 500}}}]}, "error answer"),
        ({"rules": [{"answer": {"error": {"status": 200}}}]}, "status"),
        ({"models": [], "rules": [{"answer": {}}]}, "model"),
        ({"settings": {"chunk": 0}, "rules": [{"answer": {}}]}, "chunk"),
    ],
)
def test_invalid_scenarios_are_rejected_with_the_reason(data: Any, problem: str):
    with pytest.raises(ScenarioError, match=problem):
        load_scenario(data)


def test_unreadable_and_malformed_files(tmp_path: Path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("rules: [\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(bad_yaml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(bad_json)
    a_list = tmp_path / "list.yaml"
    a_list.write_text("- rules\n")
    with pytest.raises(ScenarioError, match="expected a mapping"):
        load_scenario(a_list)


def test_first_matching_rule_wins_and_each_condition_counts(start_simulator, wire):
    scenario = {
        "rules": [
            {"match": {"model": "^big"}, "answer": {"content": "model"}},
            {"match": {"tool_choice": "required"}, "answer": {"content": "required"}},
            {"match": {"tools": ["native", "prompt"]}, "answer": {"content": "tools"}},
            {"match": {"tool_result": True}, "answer": {"content": "result"}},
            {"match": {"last_user": "first"}, "answer": {"content": "one"}},
            {"match": {"last_user": "first"}, "answer": {"content": "two"}},
        ]
    }
    sim = start_simulator(scenario, ignore_tool_choice=False)
    tool = {"type": "function", "function": {"name": "f"}}
    system = {"role": "system", "content": '[TOOL_CALL]{"name": "f"}[/TOOL_CALL]'}

    def content(messages: list[Any], **extra: Any) -> str:
        return str(ask(sim, wire, messages, **extra)["message"]["content"])

    assert content(user("first"), model="big-model") == "model"
    assert content(user("first"), tools=[tool], tool_choice="required") == "required"
    assert content(user("first"), tools=[tool]) == "tools"
    assert content([system, *user("first")]) == "tools"
    assert content([*user("q"), {"role": "tool", "tool_call_id": "1", "content": "r"}]) == "result"
    assert content(user("the first one")) == "one"
    assert content(user("nothing")) == NO_RULE_TEXT


def test_rescue_result_counts_as_a_tool_result(start_simulator, wire):
    scenario = {
        "rules": [
            {
                "match": {"tool_result": True},
                "answer": {"content": "{tool_name}|{last_tool_result}|{last_user}"},
            },
            {"answer": {"content": "no"}},
        ]
    }
    sim = start_simulator(scenario)
    messages = [
        {"role": "user", "content": "weather?\n[SYSTEM DIRECTIVE] use tools"},
        {"role": "assistant", "content": '[TOOL_CALL]{"name": "get_weather"}[/TOOL_CALL]'},
        {"role": "user", "content": "[TOOL_RESULT name=get_weather id=c1]\nsunny\n[/TOOL_RESULT]"},
    ]
    assert ask(sim, wire, messages)["message"]["content"] == "get_weather|sunny|weather?"
    two = "[TOOL_RESULT a]\none\n[/TOOL_RESULT]\n[TOOL_RESULT b]\ntwo\n[/TOOL_RESULT]"
    messages[-1] = {"role": "user", "content": two}
    assert ask(sim, wire, messages)["message"]["content"] == "b|one\ntwo|weather?"


def test_native_result_names_come_from_the_matching_call(start_simulator, wire):
    scenario = {"rules": [{"answer": {"content": "{tool_name}: {last_tool_result}"}}]}
    sim = start_simulator(scenario)
    calls = [
        {"id": "a", "type": "function", "function": {"name": "first", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{}"}},
    ]
    messages = [
        *user("go"),
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
    ]
    assert ask(sim, wire, messages)["message"]["content"] == "second: A\nB"


def test_placeholders_in_calls_and_literal_braces(start_simulator, wire):
    scenario = {
        "rules": [
            {
                "match": {"last_user": r"find (?P<what>\w+)(?: in (?P<where>\w+))?"},
                "answer": {
                    "content": '[TOOL_CALL]{"name": "{tool_name}", "q": "{what}"} {unknown}',
                    "tool_calls": [
                        {"name": "{tool_name}", "arguments": {"q": ["{what}", "{where}"], "n": 2}},
                        {"name": "raw", "arguments": '{"broken": '},
                    ],
                },
            }
        ]
    }
    sim = start_simulator(scenario)
    tool = {"type": "function", "function": {"name": "search"}}
    choice = ask(sim, wire, user("find cats"), tools=[tool])
    message = choice["message"]
    assert message["content"] == '[TOOL_CALL]{"name": "search", "q": "cats"} {unknown}'
    first, second = message["tool_calls"]
    assert first["function"] == {"name": "search", "arguments": '{"q":["cats",""],"n":2}'}
    # String arguments go out verbatim, malformed JSON included.
    assert second["function"] == {"name": "raw", "arguments": '{"broken": '}
    ollama = wire.http(sim).post(
        "/api/chat", json={"model": "m", "messages": user("find cats"), "stream": False}
    )
    calls = ollama.json()["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [{"q": ["cats", ""], "n": 2}, {}]


def test_a_call_id_given_in_the_scenario_is_sent_as_is(start_simulator, wire):
    calls = [
        {"name": "get_weather", "arguments": {}, "id": "call_fixed"},
        {"name": "get_weather", "arguments": {}, "id": ""},  # LM Studio's empty ids
        {"name": "get_weather", "arguments": {}},
    ]
    sim = start_simulator({"rules": [{"answer": {"tool_calls": calls}}]})
    ids = [c["id"] for c in ask(sim, wire, user("x"))["message"]["tool_calls"]]
    assert ids[:2] == ["call_fixed", ""]
    assert ids[2].startswith("call_")
    ollama = wire.http(sim).post(
        "/api/chat", json={"model": "m", "messages": user("x"), "stream": False}
    )
    assert [c["id"] for c in ollama.json()["message"]["tool_calls"]][:2] == ["call_fixed", ""]


def test_error_answers(start_simulator, wire):
    scenario = {
        "rules": [
            {
                "match": {"last_user": "teapot"},
                "answer": {"error": {"status": 418, "body": "short"}},
            },
            {"answer": {"error": {"status": 500, "message": "model crashed"}}},
        ]
    }
    sim = start_simulator(scenario)
    http = wire.http(sim)
    crashed = http.post("/v1/chat/completions", json={"model": "m", "messages": user("x")})
    assert crashed.status_code == 500
    assert crashed.json()["error"]["message"] == "model crashed"
    assert crashed.json()["error"]["type"] == "server_error"
    ollama = http.post("/api/chat", json={"model": "m", "messages": user("x")})
    assert (ollama.status_code, ollama.json()) == (500, {"error": "model crashed"})
    teapot = http.post("/v1/chat/completions", json={"model": "m", "messages": user("teapot")})
    assert (teapot.status_code, teapot.json()) == (418, "short")


def test_finish_reason_override(start_simulator, wire):
    sim = start_simulator({"rules": [{"answer": {"content": "cut", "finish_reason": "length"}}]})
    assert ask(sim, wire, user("x"))["finish_reason"] == "length"
    ollama = wire.http(sim).post(
        "/api/chat", json={"model": "m", "messages": user("x"), "stream": False}
    )
    assert ollama.json()["done_reason"] == "length"


def test_the_documented_examples_load_and_behave(start_simulator, wire):
    docs = Path(__file__).parents[2] / "docs" / "simulator.md"
    blocks = re.findall(r"```yaml\n(.*?)```", docs.read_text(), re.DOTALL)
    # The format overview has "{...}" placeholders; the examples are complete.
    examples = [yaml.safe_load(b) for b in blocks if "\nrules:" in b and "{...}" not in b]
    assert len(examples) == 2
    for example in examples:
        load_scenario(example)
    sim = start_simulator(examples[0])
    tool = {"type": "function", "function": {"name": "get_time"}}
    messages: list[Any] = user("What is the time in Lima?")
    first = ask(sim, wire, messages, tools=[tool])
    [call] = first["message"]["tool_calls"]
    assert call["function"] == {"name": "get_time", "arguments": '{"city":"Lima"}'}
    messages += [first["message"], {"role": "tool", "tool_call_id": call["id"], "content": "10:42"}]
    assert ask(sim, wire, messages, tools=[tool])["message"]["content"] == "It is 10:42 in Lima."
    sim = start_simulator(examples[1])
    native = ask(sim, wire, user("find x"), tools=[{"type": "function", "function": {"name": "s"}}])
    assert native["message"]["content"] == "<think>I should search.</think>Let me look that up."
    assert native["finish_reason"] == "stop"


def test_last_tool_picks_the_rule_for_each_step_of_a_task(start_simulator, wire):
    scenario = {
        "rules": [
            {
                "match": {"last_tool": "^read_file$"},
                "answer": {"content": "read: {last_tool_result}"},
            },
            {"match": {"last_tool": "list"}, "answer": {"tool_calls": [{"name": "read_file"}]}},
            {"answer": {"tool_calls": [{"name": "list_directory"}]}},
        ]
    }
    sim = start_simulator(scenario)
    client = wire.openai(sim)
    tools = [
        {"type": "function", "function": {"name": name}} for name in ("list_directory", "read_file")
    ]
    messages: list = [{"role": "user", "content": "what is in notes.txt?"}]
    names = []
    for result in ("notes.txt", "hello"):
        reply = client.chat.completions.create(model="m", messages=messages, tools=tools)
        (call,) = reply.choices[0].message.tool_calls or []
        names.append(call.function.name)
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": result},
        ]
    final = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert names == ["list_directory", "read_file"]
    assert final.choices[0].message.content == "read: hello"
