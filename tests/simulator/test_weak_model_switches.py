"""The weak-model and refusal switches over real HTTP: echoing the prompt's example
and directive, refusing tools in a server's own words."""

from __future__ import annotations

import orjson
import pytest

from toolrelay.rescue import build_rescue_request

ASK = [{"role": "user", "content": "Say hello to me."}]
HELLO = {"rules": [{"answer": {"content": "Hello!"}}]}


def _rescued(weather_tool, choice=None):
    return build_rescue_request(ASK, [weather_tool], choice)


def test_echo_example_answers_with_the_prompt_example(start_simulator, wire, weather_tool):
    sim = start_simulator(HELLO, echo_example=True)
    content = (
        wire.openai(sim)
        .chat.completions.create(model="m", messages=_rescued(weather_tool))
        .choices[0]
        .message.content
    )
    assert content == (
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "<city>"}}[/TOOL_CALL]'
    )
    # Without tools in the prompt there is nothing to copy: the scenario answers.
    plain = wire.openai(sim).chat.completions.create(model="m", messages=ASK)
    assert plain.choices[0].message.content == "Hello!"


def test_echo_directive_repeats_the_late_directive(start_simulator, wire, weather_tool):
    sim = start_simulator(HELLO, echo_directive=True)
    messages = _rescued(weather_tool)
    content = (
        wire.openai(sim).chat.completions.create(model="m", messages=messages).choices[0]
    ).message.content
    directive = messages[-1]["content"].split("\n\n", 1)[1]
    assert content == f"{directive}\n\nHello!"


def test_placeholders_and_the_directive_match(start_simulator, wire, weather_tool):
    scenario = {
        "rules": [
            {
                "match": {"directive": "blocks only"},
                "answer": {"content": "strict: {example_call}"},
            },
            {"match": {"tools": "prompt"}, "answer": {"content": "{system}"}},
        ]
    }
    sim = start_simulator(scenario)
    client = wire.openai(sim)
    normal = client.chat.completions.create(model="m", messages=_rescued(weather_tool))
    assert normal.choices[0].message.content.startswith("# Tools")
    strict = build_rescue_request(ASK, [weather_tool], "required", strength="strict")
    answer = client.chat.completions.create(model="m", messages=strict).choices[0].message
    assert answer.content.startswith('strict: [TOOL_CALL]{"name": "get_weather"')


@pytest.mark.parametrize(
    ("message", "status"), [("tools param requires --jinja flag", 500), ("no tools here", 400)]
)
def test_refuse_tools_in_the_server_s_words(start_simulator, wire, weather_tool, message, status):
    sim = start_simulator(HELLO, refuse_tools=message, refuse_tools_status=status)
    http = wire.http(sim)
    refused = http.post(
        "/v1/chat/completions", json={"model": "m", "messages": ASK, "tools": [weather_tool]}
    )
    assert refused.status_code == status
    assert refused.json()["error"]["message"] == message
    ollama = http.post(
        "/api/chat",
        json={"model": "m", "messages": ASK, "tools": [weather_tool], "stream": False},
    )
    assert (ollama.status_code, ollama.json()) == (status, {"error": message})
    # Without tools the same server answers, and its probes still claim tool support.
    fine = http.post("/v1/chat/completions", json={"model": "m", "messages": ASK})
    assert fine.json()["choices"][0]["message"]["content"] == "Hello!"
    assert http.get("/props").json()["chat_template_caps"]["supports_tools"] is True


def test_refuse_tools_in_stream_sends_an_error_event(start_simulator, wire, weather_tool):
    sim = start_simulator(HELLO, refuse_tools="template error", refuse_tools_in_stream=True)
    body = {"model": "m", "messages": ASK, "tools": [weather_tool], "stream": True}
    streamed = wire.http(sim).post("/v1/chat/completions", json=body)
    assert streamed.status_code == 200
    [line] = [line for line in streamed.text.splitlines() if line.startswith("data:")]
    assert orjson.loads(line[5:])["error"]["message"] == "template error"


def test_refuse_tools_status_must_be_an_error_status(start_simulator):
    with pytest.raises(ValueError, match="refuse_tools_status"):
        start_simulator(HELLO, refuse_tools="x", refuse_tools_status=200)
