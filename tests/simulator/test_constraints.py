"""--constraints: the simulated server honours, ignores or refuses constrained
decoding in each server's own request fields, over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import pytest

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
PROSE = {"rules": [{"answer": {"content": "Sunny, I think."}}]}
SCRIPTED_CALL = {
    "rules": [
        {
            "answer": {
                "content": 'Here: {"city": "Paris", "unit": "c"} and more',
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
            }
        }
    ]
}
ASK = [{"role": "user", "content": "weather?"}]
# The same JSON-schema constraint in each server's field.
FIELDS: dict[str, dict[str, Any]] = {
    "response_format": {
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": CITY}}
    },
    "json_schema": {"json_schema": CITY},
    "guided_json": {"guided_json": CITY},
    "structured_outputs": {"structured_outputs": {"json": CITY}},
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_json_schema_makes_the_answer_an_instance_of_it(start_simulator, wire, field):
    sim = start_simulator(PROSE)
    answer = wire.http(sim).post(
        "/v1/chat/completions", json={"model": "m", "messages": ASK, **FIELDS[field]}
    )
    content = answer.json()["choices"][0]["message"]["content"]
    assert jsonschema_rs.validator_for(CITY).is_valid(json.loads(content))


def test_the_scripted_json_that_fits_is_kept(start_simulator, wire):
    sim = start_simulator(SCRIPTED_CALL)
    answer = wire.http(sim).post(
        "/v1/chat/completions", json={"model": "m", "messages": ASK, **FIELDS["json_schema"]}
    )
    message = answer.json()["choices"][0]["message"]
    assert json.loads(message["content"]) == {"city": "Paris", "unit": "c"}
    assert not message.get("tool_calls")
    assert answer.json()["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_format_on_api_chat(start_simulator, wire, stream):
    sim = start_simulator(PROSE)
    answer = wire.http(sim).post(
        "/api/chat", json={"model": "m", "messages": ASK, "format": CITY, "stream": stream}
    )
    lines = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    content = "".join(line["message"]["content"] for line in lines)
    assert jsonschema_rs.validator_for(CITY).is_valid(json.loads(content))


def test_a_structural_tag_fixes_the_call_after_its_trigger(start_simulator, wire):
    scenario = {"rules": [{"answer": {"content": 'Checking. <f>{"name": "w", "arguments": 3}'}}]}
    sim = start_simulator(scenario)
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": '<f>{"name": "w", "arguments": ', "schema": CITY, "end": "}</f>"}],
        "triggers": ["<f>"],
    }
    answer = wire.http(sim).post(
        "/v1/chat/completions", json={"model": "m", "messages": ASK, "response_format": tag}
    )
    content = answer.json()["choices"][0]["message"]["content"]
    assert content.startswith('Checking. <f>{"name": "w", "arguments": ')
    call = json.loads(content[len("Checking. <f>") : -len("</f>")])
    assert jsonschema_rs.validator_for(CITY).is_valid(call["arguments"])


def test_ignore_reads_no_constraint(start_simulator, wire):
    sim = start_simulator(PROSE, constraints="ignore")
    answer = wire.http(sim).post(
        "/v1/chat/completions", json={"model": "m", "messages": ASK, **FIELDS["response_format"]}
    )
    assert answer.json()["choices"][0]["message"]["content"] == "Sunny, I think."


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/chat/completions", FIELDS["response_format"]),
        ("/v1/chat/completions", {"grammar": 'root ::= "x"', "grammar_lazy": False}),
        ("/api/chat", {"format": CITY, "stream": False}),
    ],
)
def test_refuse_answers_a_constrained_request_with_a_400(start_simulator, wire, path, extra):
    sim = start_simulator(PROSE, constraints="refuse")
    client = wire.http(sim)
    answer = client.post(path, json={"model": "m", "messages": ASK, **extra})
    assert answer.status_code == 400
    field = next(iter(extra))
    assert f"'{field}'" in answer.text
    # An unconstrained request is answered as ever.
    plain = client.post(path, json={"model": "m", "messages": ASK, "stream": False})
    assert plain.status_code == 200
