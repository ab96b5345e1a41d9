"""The weak-model and refusal switches over real HTTP: echoing the prompt's example
and directive, refusing tools in a server's own words."""

from __future__ import annotations

import orjson
import pytest

from tests.weather import weather_loop
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


def _tool_loop(weather_tool):
    """The rescue path's second round: the question, the model's call, its result."""
    return build_rescue_request(weather_loop("sunny, 21 C"), [weather_tool], None)


def test_copy_prompt_answers_with_the_prompt_toolrelay_wrote(start_simulator, wire, weather_tool):
    sim = start_simulator(HELLO, copy_prompt=True)
    client = wire.openai(sim)
    messages = _rescued(weather_tool)
    copied = client.chat.completions.create(model="m", messages=messages).choices[0].message
    directive = messages[-1]["content"].split("\n\n", 1)[1]
    assert copied.content == f"{messages[0]['content']}\n\n{directive}"
    # Asked to correct its calls, it copies the correction instead.
    repair = [*messages, {"role": "user", "content": "[TOOL CALL ERRORS] get_weather: bad"}]
    again = client.chat.completions.create(model="m", messages=repair).choices[0].message
    assert again.content == "[TOOL CALL ERRORS] get_weather: bad"
    # Asked the question alone, as a server would get it direct, it answers.
    plain = client.chat.completions.create(model="m", messages=ASK)
    assert plain.choices[0].message.content == "Hello!"


def test_reword_prompt_answers_with_the_directive_in_other_words(
    start_simulator, wire, weather_tool
):
    sim = start_simulator(HELLO, reword_prompt=True)
    client = wire.openai(sim)
    messages = _rescued(weather_tool)
    reworded = client.chat.completions.create(model="m", messages=messages).choices[0].message
    lines = reworded.content.splitlines()
    # The directive's sentences, each in other words; then its example call, verbatim.
    assert "a single call per block having only a JSON object inside it." in lines
    assert "to call multiple tools write multiple blocks a single after another." in lines
    assert (
        lines[-1]
        == '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "<city>"}}[/TOOL_CALL]'
    )
    assert "[SYSTEM DIRECTIVE]" not in reworded.content
    plain = client.chat.completions.create(model="m", messages=ASK)
    assert plain.choices[0].message.content == "Hello!"


def test_echo_history_repeats_the_framed_blocks_then_answers(start_simulator, wire, weather_tool):
    sim = start_simulator(
        {"rules": [{"match": {"tool_result": "sunny"}, "answer": {"content": "It is sunny."}}]},
        echo_history=True,
    )
    client = wire.openai(sim)
    messages = _tool_loop(weather_tool)
    answer = client.chat.completions.create(model="m", messages=messages).choices[0]
    assert answer.message.content == (
        "[TOOL_RESULT name=get_weather id=call_1]\nsunny, 21 C\n[/TOOL_RESULT]\nIt is sunny."
    )
    assert answer.finish_reason == "stop"
    # The echo spends a small budget: the answer is cut, finish_reason length.
    short = client.chat.completions.create(model="m", messages=messages, max_tokens=5).choices[0]
    assert (short.message.content, short.finish_reason) == (answer.message.content[:20], "length")
    # A result without the closed block has nothing to echo: the model answers.
    plain = [messages[1], {"role": "user", "content": "[TOOL_RESULT name=get_weather] sunny"}]
    unframed = client.chat.completions.create(model="m", messages=plain).choices[0].message
    assert unframed.content == "It is sunny."


def test_max_tokens_cuts_every_answer(start_simulator, wire, weather_tool):
    sim = start_simulator({"rules": [{"answer": {"content": "x" * 100}}]})
    http = wire.http(sim)
    body = {"model": "m", "messages": ASK, "max_completion_tokens": 3}
    cut = http.post("/v1/chat/completions", json=body).json()["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("x" * 12, "length")
    ollama = http.post(
        "/api/chat",
        json={"model": "m", "messages": ASK, "stream": False, "options": {"num_predict": 2}},
    ).json()
    assert (ollama["message"]["content"], ollama["done_reason"]) == ("x" * 8, "length")
    whole = http.post("/v1/chat/completions", json={**body, "max_completion_tokens": 25}).json()
    assert whole["choices"][0]["finish_reason"] == "stop"


def test_swallow_streamed_calls_once_loses_only_the_first(
    start_simulator, wire, weather_tool, weather_question
):
    sim = start_simulator(swallow_streamed_calls_once=True)
    client = wire.openai(sim)

    def streamed_calls() -> int:
        stream = client.chat.completions.create(
            model="m", messages=weather_question, tools=[weather_tool], stream=True
        )
        return sum(len(chunk.choices[0].delta.tool_calls or ()) for chunk in stream)

    plain = client.chat.completions.create(model="m", messages=ASK, stream=True)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in plain)  # not a call: kept
    assert streamed_calls() == 0
    assert streamed_calls() > 0
    assert streamed_calls() > 0
