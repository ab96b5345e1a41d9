"""OpenAI Chat Completions over real HTTP: exact shapes, streaming rules, the SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from toolrelay.simulator import Simulator, SimulatorConfig

CHUNK_KEYS = {"id", "object", "created", "model", "choices"}


def test_native_call_non_streaming_has_the_exact_shape(
    default_sim, wire, weather_tool, weather_question
):
    response = wire.http(default_sim).post(
        "/v1/chat/completions",
        json={"model": "qwen3:8b", "messages": weather_question, "tools": [weather_tool]},
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert body["object"] == "chat.completion"
    assert body["model"] == "sim/qwen3:8b"
    assert body["id"].startswith("chatcmpl-")
    [choice] = body["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant"
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert call["id"].startswith("call_")
    assert call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


def test_usage_is_deterministic(default_sim, wire, weather_question):
    request = {"model": "m", "messages": weather_question}
    first = wire.http(default_sim).post("/v1/chat/completions", json=request).json()
    second = wire.http(default_sim).post("/v1/chat/completions", json=request).json()
    assert first["usage"] == second["usage"]
    assert first["choices"] == second["choices"]


def test_streamed_call_follows_the_openai_rules(default_sim, wire, weather_tool, weather_question):
    request = {
        "model": "m",
        "messages": weather_question,
        "tools": [weather_tool],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = wire.http(default_sim).post("/v1/chat/completions", json=request)
    assert response.headers["content-type"].startswith("text/event-stream")
    payloads = wire.sse(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = payloads[:-1]
    assert {(c["id"], c["created"], c["model"]) for c in chunks} == {
        (chunks[0]["id"], chunks[0]["created"], "sim/m")
    }
    for chunk in chunks:
        assert set(chunk) == CHUNK_KEYS | {"usage"}
        assert chunk["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[1:-2]]
    assert calls[0] == {
        "index": 0,
        "id": calls[0]["id"],
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    for fragment in calls[1:]:
        assert set(fragment) == {"index", "function"}
        assert set(fragment["function"]) == {"arguments"}
    assert "".join(f["function"]["arguments"] for f in calls) == '{"city":"Paris"}'
    finish = chunks[-2]
    assert finish["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    ]
    assert all(c["usage"] is None for c in chunks[:-1])
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    last = chunks[-1]
    assert last["choices"] == []
    assert last["usage"]["total_tokens"] == (
        last["usage"]["prompt_tokens"] + last["usage"]["completion_tokens"]
    )


def test_usage_key_absent_without_include_usage(default_sim, wire):
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    payloads = wire.sse(wire.http(default_sim).post("/v1/chat/completions", json=request).text)
    assert all("usage" not in chunk for chunk in payloads[:-1])
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in payloads[:-1])
    assert text == "This is the toolrelay simulator, a test double for a model. You said: hi"


def test_sdk_stream_helper_accumulates_the_call(default_sim, wire, weather_tool, weather_question):
    client = wire.openai(default_sim)
    events = []
    with client.chat.completions.stream(
        model="m", messages=weather_question, tools=[weather_tool]
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.done" in events
    [call] = final.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"city":"Paris"}'
    assert final.choices[0].finish_reason == "tool_calls"


def test_multi_round_native_conversation_ends_with_the_result(
    default_sim, wire, weather_tool, weather_question
):
    client = wire.openai(default_sim)
    first = client.chat.completions.create(
        model="m", messages=weather_question, tools=[weather_tool]
    )
    call = (first.choices[0].message.tool_calls or [])[0]
    messages: list[Any] = [
        *weather_question,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Paris: sunny, 21°C"},
    ]
    second = client.chat.completions.create(model="m", messages=messages, tools=[weather_tool])
    assert second.choices[0].message.content == "Here is the weather in Paris: Paris: sunny, 21°C"
    assert second.choices[0].finish_reason == "stop"
    assert not second.choices[0].message.tool_calls


def test_rescue_path_gets_a_text_call_then_uses_the_result(default_sim, wire):
    client = wire.openai(default_sim)
    system = (
        "You can call tools. To call one, write\n"
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "..."}}[/TOOL_CALL]'
    )
    question = "What's the weather in Oslo?\n\n[SYSTEM DIRECTIVE] Use a tool if it helps."
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": question},
    ]
    first = client.chat.completions.create(model="m", messages=messages)
    text = first.choices[0].message.content
    assert text == (
        "I'll check the weather in Oslo.\n"
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo"}}[/TOOL_CALL]'
    )
    assert first.choices[0].finish_reason == "stop"
    messages += [
        {"role": "assistant", "content": text},
        {
            "role": "user",
            "content": "[TOOL_RESULT name=get_weather id=call_1]\nOslo: snow, -3°C\n[/TOOL_RESULT]",
        },
    ]
    second = client.chat.completions.create(model="m", messages=messages)
    assert second.choices[0].message.content == "Here is the weather in Oslo: Oslo: snow, -3°C"


def test_plain_answer_without_tools(default_sim, wire):
    reply = wire.openai(default_sim).chat.completions.create(
        model="m", messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    )
    assert reply.choices[0].message.content.endswith("You said: Hello")
    assert reply.model == "sim/m"


def test_tool_choice_required_forces_a_call(default_sim, wire, weather_tool):
    reply = wire.openai(default_sim).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Hello"}],
        tools=[weather_tool],
        tool_choice="required",
    )
    [call] = reply.choices[0].message.tool_calls or []
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city":"example"}')
    assert reply.choices[0].finish_reason == "tool_calls"


def test_named_tool_choice_calls_it_with_openais_stop(default_sim, wire, weather_tool):
    other = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
    reply = wire.openai(default_sim).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "What's the weather in Rome?"}],
        tools=[weather_tool, other],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    [call] = reply.choices[0].message.tool_calls or []
    assert (call.function.name, call.function.arguments) == ("get_time", "{}")
    assert reply.choices[0].finish_reason == "stop"


def test_tool_choice_none_suppresses_calls(default_sim, wire, weather_tool, weather_question):
    reply = wire.openai(default_sim).chat.completions.create(
        model="m", messages=weather_question, tools=[weather_tool], tool_choice="none"
    )
    assert not reply.choices[0].message.tool_calls
    assert (
        reply.choices[0].message.content == 'I would call get_weather, but tool_choice is "none".'
    )
    assert reply.choices[0].finish_reason == "stop"


def test_reasoning_and_chunking(start_simulator, wire):
    scenario = {"rules": [{"answer": {"reasoning": "Think first.", "content": "Done thinking."}}]}
    sim = start_simulator(scenario, chunk=3)
    http = wire.http(sim)
    request = {"model": "m", "messages": [{"role": "user", "content": "?"}]}
    whole = http.post("/v1/chat/completions", json=request).json()["choices"][0]["message"]
    assert whole == {
        "role": "assistant",
        "content": "Done thinking.",
        "reasoning_content": "Think first.",
    }
    payloads = wire.sse(http.post("/v1/chat/completions", json=request | {"stream": True}).text)
    deltas = [p["choices"][0]["delta"] for p in payloads[1:-2]]
    reasoning = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    content = [d["content"] for d in deltas if "content" in d]
    assert reasoning == ["Thi", "nk ", "fir", "st."]
    assert "".join(content) == "Done thinking."
    assert all(len(piece) <= 3 for piece in content)
    assert all(len(d) == 1 for d in deltas)


def test_parallel_calls_stream_one_index_after_the_other(start_simulator, wire):
    calls = [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_time", "arguments": {"tz": "CET"}},
    ]
    sim = start_simulator({"rules": [{"answer": {"tool_calls": calls}}]}, chunk=5)
    request = {"model": "m", "messages": [{"role": "user", "content": "?"}], "stream": True}
    payloads = wire.sse(wire.http(sim).post("/v1/chat/completions", json=request).text)
    entries = [
        entry
        for chunk in payloads[:-1]
        for entry in chunk["choices"][0]["delta"].get("tool_calls", [])
    ]
    indices = [entry["index"] for entry in entries]
    assert indices == sorted(indices) and set(indices) == {0, 1}
    starts = [entry for entry in entries if "id" in entry]
    assert [s["function"]["name"] for s in starts] == ["get_weather", "get_time"]
    assert starts[0]["id"] != starts[1]["id"]
    args = ["".join(e["function"]["arguments"] for e in entries if e["index"] == i) for i in (0, 1)]
    assert args == ['{"city":"Oslo"}', '{"tz":"CET"}']


def test_models_list(default_sim, wire):
    body = wire.http(default_sim).get("/v1/models").json()
    assert body["object"] == "list"
    [model] = body["data"]
    assert set(model) == {"id", "object", "created", "owned_by"}
    assert (model["id"], model["object"]) == ("toolrelay-sim", "model")
    assert [m.id for m in wire.openai(default_sim).models.list()] == ["toolrelay-sim"]


def test_async_context_manager_and_async_client(weather_tool, weather_question):
    async def main() -> str:
        async with Simulator(SimulatorConfig()) as sim:
            client = openai.AsyncOpenAI(base_url=sim.openai_url, api_key="x", max_retries=0)
            stream = await client.chat.completions.create(
                model="m", messages=weather_question, tools=[weather_tool], stream=True
            )
            names = [
                call.function.name
                async for chunk in stream
                for call in chunk.choices[0].delta.tool_calls or []
                if call.function and call.function.name
            ]
            await client.close()
            return names[0]

    assert asyncio.run(asyncio.wait_for(main(), 20)) == "get_weather"


def test_request_log_records_what_the_model_received(start_simulator, wire, weather_question):
    sim = start_simulator()
    wire.openai(sim).chat.completions.create(model="m", messages=weather_question)
    wire.http(sim).get("/v1/models")
    assert [(r.method, r.path) for r in sim.requests] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ]
    assert sim.requests[0].body["messages"] == weather_question


def test_stop_sequences_end_the_text_as_vllm_says(default_sim, wire):
    ask = {"model": "qwen3:8b", "messages": [{"role": "user", "content": "one STOP two"}]}
    whole = wire.http(default_sim).post("/v1/chat/completions", json={**ask, "stop": ["STOP"]})
    [choice] = whole.json()["choices"]
    assert choice["message"]["content"].endswith("You said: one ")
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "STOP"
    streamed = wire.http(default_sim).post(
        "/v1/chat/completions", json={**ask, "stop": "STOP", "stream": True}
    )
    chunks = wire.sse(streamed.text)[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text.endswith("You said: one ")
    assert chunks[-1]["choices"][0]["stop_reason"] == "STOP"
    plain = wire.http(default_sim).post("/v1/chat/completions", json=ask)
    assert plain.json()["choices"][0]["stop_reason"] is None
