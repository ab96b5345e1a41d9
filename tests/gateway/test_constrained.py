"""Constrained decoding through the gateway, against the simulator playing each
backend kind: what is sent when, and what a server that honours, ignores or
refuses the constraint leads to (docs/constrained.md).

The simulated model is weak: asked with tools it writes prose, or a call with
wrong arguments; only a constraint makes it call well.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import pytest
import yaml

from tests.gateway.serve_process import serve_process
from tests.gateway.support import TIME_TOOL, GatewayServer, gateway
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER, TIME_TOOL]
WRONG_CALL = '[TOOL_CALL]{"name": "get_weather", "arguments": {"days": "three"}}[/TOOL_CALL]'
RULES: list[dict[str, Any]] = [
    {
        "match": {"last_user": "^native wrong", "tools": "native"},
        "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"days": "three"}}]},
    },
    {"match": {"last_user": "^wrong"}, "answer": {"content": "Let me look. " + WRONG_CALL}},
    {"answer": {"content": "I think it is sunny."}},
]
KINDS = ["llamacpp", "vllm", "sglang", "ollama", "lmstudio"]
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@contextmanager
def _stack(
    kind: str,
    constraints: str = "honour",
    sim: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> Iterator[tuple[Simulator, GatewayServer]]:
    scenario = {"rules": [*(rules or ()), *RULES]}
    config = SimulatorConfig.load(scenario, constraints=constraints, **(sim or {}))
    with (
        Simulator(config) as simulator,
        gateway(simulator.openai_url, backend_kind=kind, **settings) as gw,
    ):
        yield simulator, gw


def _ask(
    gw: GatewayServer, text: str, *, stream: bool, tools: Any = None, **extra: Any
) -> dict[str, Any]:
    """The answer as one dict: content, calls (name, arguments), finish reason, warning."""
    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": text}],
        "tools": tools or TOOLS,
        "stream": stream,
        **extra,
    }
    response = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)
    assert response.status_code == 200, response.text
    if not stream:
        answer = response.json()
        message = answer["choices"][0]["message"]
        return {
            "content": message.get("content"),
            "calls": [
                (c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in message.get("tool_calls") or []
            ],
            "finish_reason": answer["choices"][0]["finish_reason"],
            "warning": answer.get("toolrelay_warning"),
        }
    content, calls, finish, warning = "", {}, None, None
    for line in response.text.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: ") :])
        warning = chunk.get("toolrelay_warning") or warning
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for part in delta.get("tool_calls") or ():
                entry = calls.setdefault(part["index"], ["", ""])
                entry[0] += part.get("function", {}).get("name") or ""
                entry[1] += part.get("function", {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {
        "content": content or None,
        "calls": [(name, json.loads(arguments)) for name, arguments in calls.values()],
        "finish_reason": finish,
        "warning": warning,
    }


def _completions(sim: Simulator) -> list[Any]:
    return [r.body for r in sim.requests if r.path.endswith("/chat/completions")]


def _learned(gw: GatewayServer) -> dict[str, Any]:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return {
        item["fact"]: (item["value"], item["reason"])
        for item in health["backends"][0]["learned"]
        if item["fact"].startswith("takes_")
    }


def _schema(body: dict[str, Any]) -> dict[str, Any]:
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    return dict(response_format["json_schema"]["schema"])


# --- required and named: the first attempt constrained ------------------------------


@STREAM
@pytest.mark.parametrize("kind", KINDS)
def test_required_on_the_rescue_path_is_one_constrained_request(kind: str, stream: bool) -> None:
    with _stack(kind, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "weather in Paris?", stream=stream, tool_choice="required")
        sent = _completions(sim)
        learned = _learned(gw)
    assert answer["calls"] == [("get_weather", {"city": "example"})]
    assert answer["finish_reason"] == "tool_calls" and answer["warning"] is None
    assert len(sent) == 1, "no re-ask"
    names = [variant["properties"]["name"]["const"] for variant in _schema(sent[0])["anyOf"]]
    assert names == ["get_weather", "get_time"]
    assert "tools" not in sent[0]
    assert learned["takes_json_schema"][0] is True


@pytest.mark.parametrize("kind", ["vllm", "ollama"])
def test_a_named_choice_is_constrained_to_that_tool(kind: str) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    with _stack(kind, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "time?", stream=False, tool_choice=named)
        sent = _completions(sim)
    assert answer["calls"] == [("get_time", {"tz": "example"})]
    schema = _schema(sent[0])
    assert schema["properties"]["name"] == {"const": "get_time"}
    assert schema["properties"]["arguments"] == TIME_TOOL["function"]["parameters"]


def test_a_native_required_call_is_left_to_a_server_that_honours_tool_choice() -> None:
    with _stack("vllm", tool_mode="native") as (sim, gw):
        answer = _ask(gw, "weather?", stream=False, tool_choice="required")
        sent = _completions(sim)
    assert answer["calls"] and len(sent) == 1
    assert "response_format" not in sent[0] and sent[0]["tool_choice"] == "required"


@STREAM
def test_ollama_ignores_tool_choice_so_its_native_required_call_is_constrained(
    stream: bool,
) -> None:
    with _stack("ollama", sim={"ignore_tool_choice": True}, tool_mode="native") as (sim, gw):
        answer = _ask(gw, "weather?", stream=stream, tool_choice="required")
        sent = _completions(sim)
    assert answer["calls"] == [("get_weather", {"city": "example"})]
    assert len(sent) == 1 and sent[0]["tools"] and _schema(sent[0])["anyOf"]


NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}
# What each choice gets from a constrained first attempt (the simulator makes the
# schema's instance up: the first tool the choice allows, sample values).
CHOICES = {
    "required": ("required", ("get_weather", {"city": "example"})),
    "named": (NAMED_TIME, ("get_time", {"tz": "example"})),
}


@STREAM
@pytest.mark.parametrize("choice", list(CHOICES))
def test_llama_cpp_native_required_and_named_are_constrained_beside_tools(
    choice: str, stream: bool
) -> None:
    # llama-server reads a named tool_choice as "auto" and lets prose run before a
    # required call (docs/constrained.md): the simulator ignores tool_choice as it
    # does. The model's configured format does not hide the call's JSON text.
    tool_choice, expected = CHOICES[choice]
    sim = {"ignore_tool_choice": True}
    with _stack("llamacpp", sim=sim, tool_mode="native", format="hermes") as (sim_, gw):
        answer = _ask(gw, "weather?", stream=stream, tool_choice=tool_choice)
        sent = _completions(sim_)
        learned = _learned(gw)
    assert answer["calls"] == [expected] and answer["warning"] is None
    assert answer["content"] is None and answer["finish_reason"] == "tool_calls"
    assert len(sent) == 1, "no re-ask"
    assert sent[0]["tools"] == TOOLS and sent[0]["tool_choice"] == tool_choice
    assert "grammar" not in sent[0], "llama-server refuses a grammar beside tools"
    schema = _schema(sent[0])
    names = [variant["properties"]["name"]["const"] for variant in schema.get("anyOf", [schema])]
    assert names == (["get_weather", "get_time"] if choice == "required" else ["get_time"])
    assert learned["takes_json_schema"][0] is True


@STREAM
@pytest.mark.parametrize("choice", list(CHOICES))
def test_llama_cpp_native_required_and_named_on_the_messages_front(
    choice: str, stream: bool
) -> None:
    named: Any = {"type": "tool", "name": "get_time"}
    tool_choice: Any = {"type": "any"} if choice == "required" else named
    _, (name, arguments) = CHOICES[choice]
    tools: Any = [
        {"name": tool["function"]["name"], "input_schema": tool["function"]["parameters"]}
        for tool in TOOLS
    ]
    ask: Any = {
        "model": "sim",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": tools,
        "tool_choice": tool_choice,
    }
    with _stack("llamacpp", sim={"ignore_tool_choice": True}, tool_mode="native") as (sim, gw):
        client = anthropic.Anthropic(base_url=gw.url, api_key="none", max_retries=0, timeout=20)
        if stream:
            with client.messages.stream(**ask) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**ask)
        sent = _completions(sim)
    uses = [(block.name, block.input) for block in message.content if block.type == "tool_use"]
    assert uses == [(name, arguments)] and message.stop_reason == "tool_use"
    assert len(sent) == 1 and sent[0]["tools"] and "response_format" in sent[0]


@pytest.mark.parametrize("constraints", ["ignore", "refuse"])
def test_llama_cpp_native_schema_ignored_or_refused_falls_back_without_an_error(
    constraints: str,
) -> None:
    sim = {"ignore_tool_choice": True}
    with _stack("llamacpp", constraints, sim=sim, tool_mode="native") as (sim_, gw):
        first = _ask(gw, "weather?", stream=False, tool_choice="required")
        before = len(_completions(sim_))
        _ask(gw, "weather?", stream=False, tool_choice="required")
        sent = _completions(sim_)
        learned = _learned(gw)
    # The old route: unmet, with the warning, never an error; and remembered.
    assert first["calls"] == [] and "required" in first["warning"]
    assert "response_format" in sent[0] and all(body["tools"] for body in sent)
    assert not any("response_format" in body for body in sent[before:])
    assert learned["takes_json_schema"][0] is False


def test_a_backend_of_unknown_kind_is_not_constrained() -> None:
    with _stack("openai", tool_mode="rescue") as (sim, gw):
        _ask(gw, "weather?", stream=False, tool_choice="required")
        sent = _completions(sim)
    assert not any("response_format" in body for body in sent)
    assert len(sent) == 2, "the re-ask, as without constraints"


# --- refused and ignored ------------------------------------------------------------


@STREAM
def test_a_refused_constraint_is_asked_again_without_and_remembered(stream: bool) -> None:
    with _stack("llamacpp", constraints="refuse", tool_mode="rescue") as (sim, gw):
        first = _ask(gw, "weather?", stream=stream, tool_choice="required")
        before = len(_completions(sim))
        _ask(gw, "weather?", stream=stream, tool_choice="required")
        sent = _completions(sim)
        learned = _learned(gw)
    # The model stays weak without its constraint: required unmet, but no error.
    assert first["calls"] == [] and "required" in first["warning"]
    assert ["response_format" in body for body in sent[:before]] == [True, False, False]
    assert not any("response_format" in body for body in sent[before:])
    value, reason = learned["takes_json_schema"]
    assert value is False and "400" in reason and "response_format" in reason


def test_an_ignored_constraint_is_remembered() -> None:
    with _stack("vllm", constraints="ignore", tool_mode="rescue") as (sim, gw):
        _ask(gw, "weather?", stream=False, tool_choice="required")
        sent = _completions(sim)
        learned = _learned(gw)
    assert ["response_format" in body for body in sent] == [True, False]
    value, reason = learned["takes_json_schema"]
    assert value is False and "outside" in reason


# --- the rescue path under auto: a lazy constraint ------------------------------------


@STREAM
@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_a_structural_tag_holds_the_call_after_the_marker(kind: str, stream: bool) -> None:
    with _stack(kind, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "wrong weather in Paris", stream=stream)
        sent = _completions(sim)
    assert answer["calls"] == [("get_weather", {"city": "example"})]
    assert answer["content"].strip() == "Let me look."
    assert len(sent) == 1, "valid by construction: no correction re-ask"
    tag = sent[0]["response_format"]
    assert tag["type"] == "structural_tag" and tag["triggers"] == ["[TOOL_CALL]"]
    assert [s["begin"] for s in tag["structures"]] == [
        '[TOOL_CALL]{"name": "get_weather", "arguments": ',
        '[TOOL_CALL]{"name": "get_time", "arguments": ',
    ]


@pytest.mark.parametrize("parallel", [True, False])
def test_llama_cpp_gets_a_lazy_grammar_triggered_by_the_marker(parallel: bool) -> None:
    """One call block, then the answer ends, either way: a weak model under a
    grammar that admits more repeats its block until the token budget ends."""
    with _stack("llamacpp", tool_mode="rescue", constrain="grammar") as (sim, gw):
        _ask(gw, "weather?", stream=False, parallel_tool_calls=parallel)
        sent = _completions(sim)
    body = sent[0]
    assert body["grammar_lazy"] is True
    assert body["grammar_triggers"] == [{"type": 1, "value": "[TOOL_CALL]"}]
    assert 'name ::= "\\"get_weather\\"" | "\\"get_time\\""' in body["grammar"]
    assert body["grammar"].startswith("root ::= block\n")
    assert "response_format" not in body


@pytest.mark.parametrize("kind", ["ollama", "lmstudio", "llamacpp"])
def test_servers_without_a_lazy_constraint_get_none_under_auto(kind: str) -> None:
    # llama.cpp's grammar is not one: on llama-server any grammar changes the text
    # before its trigger (a real model wrote a false call under it); sent only when
    # constrain names it.
    with _stack(kind, tool_mode="rescue") as (sim, gw):
        _ask(gw, "weather?", stream=False)
        sent = _completions(sim)
    assert not {"response_format", "grammar"} & set(sent[0])


def test_a_lazy_grammar_the_server_refuses_is_asked_again_without() -> None:
    refuse = {"constraints": "refuse", "tool_mode": "rescue", "constrain": "grammar"}
    with _stack("llamacpp", **refuse) as (sim, gw):
        answer = _ask(gw, "weather?", stream=True)
        sent = _completions(sim)
        learned = _learned(gw)
    assert answer["content"] == "I think it is sunny."
    assert ["grammar" in body for body in sent] == [True, False]
    assert learned["takes_grammar"][0] is False


# --- the correction re-ask, tool_choice none, settings ---------------------------------


@STREAM
@pytest.mark.parametrize("kind", ["vllm", "llamacpp"])
def test_the_correction_re_ask_is_constrained_to_the_tool_corrected(
    kind: str, stream: bool
) -> None:
    with _stack(kind, tool_mode="native") as (sim, gw):
        answer = _ask(gw, "native wrong weather", stream=stream)
        sent = _completions(sim)
    assert answer["calls"] == [("get_weather", {"city": "example"})]
    assert len(sent) == 2 and "response_format" not in sent[0]
    schema = _schema(sent[1])
    assert schema["properties"]["name"] == {"const": "get_weather"}


@pytest.mark.parametrize("kind", ["llamacpp", "vllm"])
def test_tool_choice_none_on_the_rescue_path(kind: str) -> None:
    """llama.cpp gets a grammar of text without the call marker; servers with no
    grammar get nothing."""
    with _stack(kind, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "weather?", stream=False, tool_choice="none")
        sent = _completions(sim)
    assert answer["calls"] == [] and answer["content"] == "I think it is sunny."
    assert "response_format" not in sent[0]
    if kind == "llamacpp":
        assert sent[0]["grammar"].startswith("root ::= s0\n")
        assert "grammar_lazy" not in sent[0]
    else:
        assert "grammar" not in sent[0]


def test_constrain_off_per_request_and_a_kind_per_model(tmp_path: Any) -> None:
    with _stack("vllm", tool_mode="rescue", models={"sim": {"constrain": "grammar"}}) as (sim, gw):
        _ask(gw, "weather?", stream=False, toolrelay_constrain="off")
        _ask(gw, "weather?", stream=False)
        sent = _completions(sim)
    assert not {"response_format", "grammar", "toolrelay_constrain"} & set(sent[0])
    # The model's setting names the grammar: sent although vLLM's kind would take a tag.
    assert "grammar" in sent[1] and "response_format" not in sent[1]


def test_an_unknown_constrain_value_is_a_400() -> None:
    with _stack("vllm") as (_, gw):
        body = {"model": "sim", "messages": [{"role": "user", "content": "hi"}]}
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={**body, "toolrelay_constrain": "regex"},
            timeout=10,
        )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "toolrelay_constrain"


@pytest.mark.parametrize(
    ("kind", "tool_mode", "sim"),
    [("vllm", "rescue", {}), ("llamacpp", "native", {"ignore_tool_choice": True})],
    ids=["rescue", "native-llamacpp"],
)
def test_a_schema_no_engine_takes_goes_unconstrained(
    caplog: pytest.LogCaptureFixture, kind: str, tool_mode: str, sim: dict[str, Any]
) -> None:
    caplog.set_level(logging.INFO, "toolrelay.constrain")
    recursive = {
        "type": "function",
        "function": {
            "name": "walk",
            "parameters": {
                "type": "object",
                "properties": {"node": {"$ref": "#/$defs/node"}},
                "$defs": {"node": {"properties": {"next": {"$ref": "#/$defs/node"}}}},
            },
        },
    }
    with _stack(kind, sim=sim, tool_mode=tool_mode) as (simulator, gw):
        answer = _ask(gw, "walk", stream=False, tools=[recursive], tool_choice="required")
        sent = _completions(simulator)
    assert answer["calls"] == [] and "required" in answer["warning"]
    assert not any("response_format" in body for body in sent)
    assert any("cannot be constrained" in r.getMessage() for r in caplog.records)


def test_constrain_off_in_a_yaml_config_is_off() -> None:
    """YAML 1.1 reads a bare `off` as false: the setting still means off."""
    loaded = yaml.safe_load("constrain: off\nmodels:\n  m:\n    constrain: off\n")
    settings = Settings(backend="http://127.0.0.1:1/v1", **loaded)
    assert settings.round_options("m")["constrain"] == "off"
    assert settings.round_options("other")["constrain"] == "off"


def test_serve_takes_constrain_as_a_flag() -> None:
    with Simulator(SimulatorConfig()) as sim:
        args = ("--backend", sim.openai_url, "--constrain", "structural_tag")
        with serve_process(*args) as served:
            health = httpx.get(served.url + "/health", timeout=30).json()
    assert health["settings"]["constrain"] == "structural_tag"


ADD: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {
                "numbers": {"type": "array", "items": {"type": "integer"}},
                "label": {"type": "string"},
            },
            "required": ["numbers", "label"],
        },
    },
}


# The simulator writes {"name": "add", "arguments": {"numbers": [], "label": "example"}}
# and a budget of N tokens keeps 4N characters: 10 cuts inside "numbers", 11-13 after
# it (the lenient reader makes a call of it that lacks "label"), 14 inside "label".
@pytest.mark.parametrize("budget", [10, 11, 12, 13, 14])
def test_a_constrained_answer_cut_by_the_token_limit_teaches_nothing(budget: int) -> None:
    # Cut mid-call, the answer shows the budget, not whether the server honours the
    # schema: learning "ignored" from it would turn constraints off for the model.
    with _stack("vllm", tool_mode="rescue") as (sim, gw):
        _ask(gw, "add?", stream=False, tools=[ADD], tool_choice="required", max_tokens=budget)
        cut = _learned(gw)
        _ask(gw, "add them", stream=False, tools=[ADD], tool_choice="required")
        sent = _completions(sim)
        after = _learned(gw)
    assert "takes_json_schema" not in cut
    assert "response_format" in sent[-1], "the next request is constrained still"
    assert after["takes_json_schema"][0] is True


@STREAM
@pytest.mark.parametrize("budget", [10, 11, 12, 13, 14])
def test_a_constrained_call_cut_by_the_clients_token_limit_is_not_asked_again(
    budget: int, stream: bool
) -> None:
    # max_tokens is the client's budget: a re-ask under it is cut again (on the real
    # model every one of four requests was), and a cut call is no call.
    with _stack("vllm", tool_mode="rescue") as (sim, gw):
        answer = _ask(
            gw, "add?", stream=stream, tools=[ADD], tool_choice="required", max_tokens=budget
        )
        sent = _completions(sim)
    assert len(sent) == 1 and "response_format" in sent[0]
    assert answer["calls"] == [] and answer["content"] is None
    assert answer["finish_reason"] == "length"
    assert f"cut at max_tokens ({budget})" in answer["warning"]


# The structural tag makes the answer 'Let me look. [TOOL_CALL]{"name": "get_weather",
# "arguments": {"city": "example"}}[/TOOL_CALL]' (93 characters): 10 tokens cut inside
# the name, 16 inside a key, 18 inside a value, 20 after the arguments (the lenient
# reader makes a valid call of it), 21 inside the closing marker.
@STREAM
@pytest.mark.parametrize("budget", [10, 16, 18, 20, 21])
def test_a_lazily_constrained_call_cut_by_the_token_limit_is_no_call(
    budget: int, stream: bool
) -> None:
    # As a whole-call cut: a cut call is no call, and a correction re-ask under the
    # same limit is cut again. The prose before the call stays.
    with _stack("vllm", tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "wrong weather in Paris", stream=stream, max_tokens=budget)
        sent = _completions(sim)
        learned = _learned(gw)
    assert len(sent) == 1 and sent[0]["response_format"]["type"] == "structural_tag"
    assert answer["calls"] == [] and answer["content"].strip() == "Let me look."
    assert answer["finish_reason"] == "length"
    assert f"cut at max_tokens ({budget})" in answer["warning"]
    assert "takes_structural_tag" not in learned, "a cut answer teaches nothing"


@STREAM
@pytest.mark.parametrize("budget", [10, 18])
def test_a_call_cut_under_llama_cpps_lazy_grammar_is_no_call(budget: int, stream: bool) -> None:
    # The simulator applies no grammar: the scripted call, cut in its name or its value.
    with _stack("llamacpp", tool_mode="rescue", constrain="grammar") as (sim, gw):
        answer = _ask(gw, "wrong weather in Paris", stream=stream, max_tokens=budget)
        sent = _completions(sim)
    assert len(sent) == 1 and sent[0]["grammar_lazy"] is True
    assert answer["calls"] == [] and answer["content"].strip() == "Let me look."
    assert answer["finish_reason"] == "length"
    assert f"cut at max_tokens ({budget})" in answer["warning"]


@STREAM
def test_a_lazily_constrained_answer_cut_in_its_prose_is_prose_cut_short(stream: bool) -> None:
    with _stack("vllm", tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "weather?", stream=stream, max_tokens=3)
        sent = _completions(sim)
    assert len(sent) == 1 and "response_format" in sent[0]
    assert answer["content"] == "I think it i" and answer["finish_reason"] == "length"
    assert answer["warning"] is None


def test_a_correction_re_ask_cut_by_the_token_limit_says_so() -> None:
    # The first answer (49 characters) fits 15 tokens; the corrected call cannot.
    long_name = "a_parameter_whose_name_alone_takes_up_most_of_the_budget"
    tool = {
        "type": "function",
        "function": {
            "name": "t",
            "parameters": {
                "type": "object",
                "properties": {long_name: {"type": "string"}},
                "required": [long_name],
            },
        },
    }
    empty = '[TOOL_CALL]{"name":"t","arguments":{}}[/TOOL_CALL]'
    rules = [{"match": {"last_user": "^empty"}, "answer": {"content": empty}}]
    # llama.cpp: no lazy constraint on the first answer (a structural tag would make
    # it the valid call, too long for the budget: cut, and no correction re-ask).
    with _stack("llamacpp", rules=rules, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "empty call", stream=False, tools=[tool], max_tokens=15)
        sent = _completions(sim)
    # (A third request, without tools, is the plain re-ask of a round that left nothing.)
    assert sent[1]["response_format"]["type"] == "json_schema", "the correction re-ask"
    assert answer["calls"] == []
    assert "cut at max_tokens (15)" in answer["warning"]


@STREAM
def test_a_constrained_call_with_a_copied_placeholder_is_no_call(stream: bool) -> None:
    # The answer fits the schema, its value is a placeholder: no sign that the server
    # ignored the constraint (the real model's "<species>" switched constraints off
    # for it, and its re-ask went unconstrained). Nor a call to correct: a constrained
    # correction re-ask only writes the copy again (four requests on the real model).
    copy = '{"name": "get_weather", "arguments": {"city": "<city>"}}'
    rules = [{"match": {"last_user": "^copy"}, "answer": {"content": copy}}]
    with _stack("llamacpp", rules=rules, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "copy the weather", stream=stream, tool_choice="required")
        sent = _completions(sim)
        learned = _learned(gw)
    # The required re-ask, constrained too, and no correction re-ask after it.
    assert len(sent) == 2 and all("response_format" in body for body in sent)
    assert learned["takes_json_schema"][0] is True
    assert answer["calls"] == [] and "required" in answer["warning"]


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(message["content"]) for message in body["messages"])


@STREAM
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_a_whole_call_constraint_shows_no_example_to_copy(
    kind: str, choice: Any, stream: bool
) -> None:
    # The simulated model copies the prompt's example call, as SmolLM2-135M did on
    # BFCL's multiple_7 (its placeholder, under the constraint, every attempt). The
    # constraint fixes the call's format: the prompt shows neither block nor example.
    with _stack(kind, sim={"echo_example": True}, tool_mode="rescue") as (sim, gw):
        answer = _ask(gw, "weather in Paris?", stream=stream, tool_choice=choice)
        sent = _completions(sim)
    assert answer["calls"] == [("get_weather", {"city": "example"})]
    assert len(sent) == 1 and "response_format" in sent[0]
    prompt = _prompt(sent[0])
    assert "<city>" not in prompt and "[TOOL_CALL]" not in prompt
    assert "### get_weather" in prompt and '"arguments"' in prompt


def test_an_unconstrained_rescue_prompt_still_shows_its_examples() -> None:
    with _stack("llamacpp", sim={"echo_example": True}, tool_mode="rescue") as (sim, gw):
        off = {"toolrelay_constrain": "off"}
        answer = _ask(gw, "weather?", stream=False, tool_choice="required", **off)
        sent = _completions(sim)
    assert answer["calls"] == [], "the copy is no call"
    assert all("<city>" in _prompt(body) for body in sent)


def test_a_refused_constraint_is_asked_again_with_the_examples() -> None:
    # The unconstrained request is the rescue path's usual one, call format and all.
    with _stack("vllm", constraints="refuse", tool_mode="rescue") as (sim, gw):
        _ask(gw, "weather?", stream=False, tool_choice="required")
        sent = _completions(sim)
    assert "[TOOL_CALL]" not in _prompt(sent[0]) and "[TOOL_CALL]" in _prompt(sent[1])
