"""Every failure switch, over real HTTP, reproducing the real case it stands for."""

from __future__ import annotations

import socket
import time

import httpx
import openai
import orjson
import pytest

TOOLS_SEEN = {
    "rules": [
        {"match": {"tools": "native"}, "answer": {"tool_calls": [{"name": "get_weather"}]}},
        {"match": {"tools": "none"}, "answer": {"content": "I see no tools."}},
    ]
}
TAGGED = {
    "rules": [
        {
            "answer": {
                "reasoning": "I should call the tool.",
                "content": 'Let me check.<tool_call>\n{"name": "get_weather"}\n</tool_call>',
            }
        }
    ]
}
HELLO = [{"role": "user", "content": "hello"}]


def test_strip_tools_hides_tools_and_tool_choice(start_simulator, wire, weather_tool):
    sim = start_simulator(TOOLS_SEEN, strip_tools=True)
    reply = wire.openai(sim).chat.completions.create(
        model="m", messages=HELLO, tools=[weather_tool], tool_choice="required"
    )
    assert reply.choices[0].message.content == "I see no tools."
    assert not reply.choices[0].message.tool_calls
    # The proxy strips after receiving: the log shows what the client sent.
    assert sim.requests[0].body["tools"] == [weather_tool]
    ollama = wire.http(sim).post(
        "/api/chat",
        json={"model": "m", "messages": HELLO, "tools": [weather_tool], "stream": False},
    )
    assert ollama.json()["message"]["content"] == "I see no tools."


def test_without_strip_tools_the_same_request_calls(start_simulator, wire, weather_tool):
    sim = start_simulator(TOOLS_SEEN)
    reply = wire.openai(sim).chat.completions.create(
        model="m", messages=HELLO, tools=[weather_tool]
    )
    assert (reply.choices[0].message.tool_calls or [])[0].function.name == "get_weather"


def test_stop_at_tool_call_tag_truncates(start_simulator, wire):
    sim = start_simulator(TAGGED, stop_at_tool_call_tag=True)
    http = wire.http(sim)
    request = {"model": "m", "messages": HELLO}
    body = http.post("/v1/chat/completions", json=request).json()
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "I should call the tool.",
    }
    assert body["choices"][0]["finish_reason"] == "stop"
    payloads = wire.sse(http.post("/v1/chat/completions", json=request | {"stream": True}).text)
    text = "".join(p["choices"][0]["delta"].get("content", "") for p in payloads[:-1])
    assert text == "Let me check."
    ollama = http.post("/api/chat", json=request | {"stream": False}).json()
    assert ollama["message"]["content"] == "Let me check."


def test_stop_at_tag_leaves_a_constrained_choice_its_call(start_simulator, wire, weather_tool):
    """vLLM decodes a required or named choice as guided JSON, not through the tag."""
    sim = start_simulator(TAGGED, stop_at_tool_call_tag=True)
    client = wire.openai(sim)
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        reply = client.chat.completions.create(
            model="m", messages=HELLO, tools=[weather_tool], tool_choice=choice
        )
        message = reply.choices[0].message
        assert message.content == "Let me check."
        assert [call.function.name for call in message.tool_calls or []] == ["get_weather"]
    plain = client.chat.completions.create(model="m", messages=HELLO, tools=[weather_tool])
    assert plain.choices[0].message.tool_calls is None
    assert plain.choices[0].finish_reason == "stop"


def test_without_stop_at_tag_the_markup_comes_through(start_simulator, wire):
    sim = start_simulator(TAGGED)
    reply = wire.openai(sim).chat.completions.create(model="m", messages=HELLO)
    assert "<tool_call>" in (reply.choices[0].message.content or "")


def test_swallow_streamed_calls_empties_streamed_call_rounds(
    start_simulator, wire, weather_tool, weather_question
):
    sim = start_simulator(swallow_streamed_calls=True)
    http = wire.http(sim)
    request = {
        "model": "m",
        "messages": weather_question,
        "tools": [weather_tool],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = http.post("/v1/chat/completions", json=request)
    assert response.status_code == 200
    payloads = wire.sse(response.text)
    assert [p["choices"] for p in payloads[:-2]] == [
        [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}],
    ]
    assert payloads[-2]["choices"] == [] and payloads[-1] == "[DONE]"
    # Non-streaming still returns the call: the engine's fallback depends on it.
    whole = http.post("/v1/chat/completions", json=request | {"stream": False}).json()
    assert whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_swallow_also_eats_text_calls_but_not_plain_text(start_simulator, wire):
    sim = start_simulator(swallow_streamed_calls=True)
    http = wire.http(sim)
    system = {"role": "system", "content": '[TOOL_CALL]{"name": "get_weather"}[/TOOL_CALL]'}
    request = {"model": "m", "stream": True}
    rescue = request | {"messages": [system, {"role": "user", "content": "weather in Rome?"}]}
    payloads = wire.sse(http.post("/v1/chat/completions", json=rescue).text)
    assert all("content" not in p["choices"][0]["delta"] for p in payloads[1:-1])
    plain = wire.sse(http.post("/v1/chat/completions", json=request | {"messages": HELLO}).text)
    assert "".join(p["choices"][0]["delta"].get("content", "") for p in plain[:-1]).endswith(
        "hello"
    )


def test_swallow_on_ollama_stream(start_simulator, wire, weather_tool, weather_question):
    sim = start_simulator(swallow_streamed_calls=True)
    request = {"model": "m", "messages": weather_question, "tools": [weather_tool]}
    [last] = wire.ndjson(wire.http(sim).post("/api/chat", json=request).text)
    assert last["done"] is True and last["done_reason"] == "stop"
    assert last["message"] == {"role": "assistant", "content": ""}


def test_no_tools_support_errors_in_both_shapes(start_simulator, wire, weather_tool):
    sim = start_simulator(no_tools_support=True)
    http = wire.http(sim)
    request = {"model": "gemma:2b", "messages": HELLO, "tools": [weather_tool]}
    ollama = http.post("/api/chat", json=request)
    assert (ollama.status_code, ollama.json()) == (
        400,
        {"error": "gemma:2b does not support tools"},
    )
    openai_shape = http.post("/v1/chat/completions", json=request)
    assert openai_shape.status_code == 400
    assert openai_shape.json() == {
        "error": {
            "message": "gemma:2b does not support tools",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    with pytest.raises(openai.BadRequestError, match="does not support tools"):
        wire.openai(sim).chat.completions.create(
            model="gemma:2b", messages=HELLO, tools=[weather_tool]
        )
    assert http.post("/api/chat", json=request | {"tools": None}).status_code == 200
    assert http.post("/api/show", json={"model": "gemma:2b"}).json()["capabilities"] == [
        "completion"
    ]


@pytest.mark.parametrize(
    ("capabilities", "has_tools"),
    [(("completion", "tools"), True), (("completion",), False), (("completion", "vision"), False)],
)
def test_capabilities_drive_api_show(start_simulator, wire, capabilities, has_tools):
    sim = start_simulator(capabilities=capabilities)
    body = wire.http(sim).post("/api/show", json={"model": "m"}).json()
    assert body["capabilities"] == list(capabilities)
    assert (".Tools" in body["template"]) is has_tools


def test_ignore_tool_choice(start_simulator, wire, weather_tool):
    sim = start_simulator(ignore_tool_choice=True)
    reply = wire.openai(sim).chat.completions.create(
        model="m", messages=HELLO, tools=[weather_tool], tool_choice="required"
    )
    assert not reply.choices[0].message.tool_calls
    assert reply.choices[0].message.content.endswith("You said: hello")


def test_chunk_sets_delta_size(start_simulator, wire):
    sim = start_simulator({"rules": [{"answer": {"content": "abcdefghij"}}]}, chunk=4)
    request = {"model": "m", "messages": HELLO, "stream": True}
    payloads = wire.sse(wire.http(sim).post("/v1/chat/completions", json=request).text)
    pieces = [p["choices"][0]["delta"]["content"] for p in payloads[1:-2]]
    assert pieces == ["abcd", "efgh", "ij"]
    lines = wire.ndjson(wire.http(sim).post("/api/chat", json=request).text)
    assert [line["message"]["content"] for line in lines[:-1]] == ["abcd", "efgh", "ij"]


def test_delay_ms_paces_the_deltas(start_simulator, wire):
    sim = start_simulator({"rules": [{"answer": {"content": "abcdefghij"}}]}, chunk=2, delay_ms=40)
    request = {"model": "m", "messages": HELLO, "stream": True}
    arrivals = []
    started = time.monotonic()
    with wire.http(sim).stream("POST", "/v1/chat/completions", json=request) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - started)
    # role + 5 content + finish + [DONE]: seven pauses of 40 ms.
    assert len(arrivals) == 8
    assert arrivals[-1] - arrivals[0] >= 0.25


def test_delay_ms_does_not_pace_a_finished_answer(start_simulator, wire):
    # Paced, these ten deltas would take ten seconds: far from any load's noise.
    sim = start_simulator({"rules": [{"answer": {"content": "abcdefghij"}}]}, chunk=1,
                          delay_ms=1000)  # fmt: skip
    request = {"model": "m", "messages": HELLO, "stream": False}
    started = time.monotonic()
    wire.http(sim).post("/v1/chat/completions", json=request)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
def test_fail_after_chunks_drops_the_connection(start_simulator, wire, path):
    sim = start_simulator({"rules": [{"answer": {"content": "x" * 40}}]}, fail_after_chunks=3)
    request = {"model": "m", "messages": HELLO, "stream": True}
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        wire.http(sim).stream("POST", path, json=request) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                received.append(line)
    assert len(received) == 3
    # The server is still fine afterwards.
    assert wire.http(sim).get("/v1/models").status_code == 200


def test_fail_after_chunks_through_the_sdk(start_simulator, wire):
    sim = start_simulator({"rules": [{"answer": {"content": "x" * 40}}]}, fail_after_chunks=2)
    stream = wire.openai(sim).chat.completions.create(model="m", messages=HELLO, stream=True)
    seen = 0
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in stream:
            seen += 1
    assert seen == 2


def test_close_after_stream_ends_the_stream_then_closes_unannounced(start_simulator):
    sim = start_simulator({"rules": [{"answer": {"content": "hi"}}]}, close_after_stream=True)
    body = orjson.dumps({"model": "m", "messages": HELLO, "stream": True})
    host, port = sim.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        received = b""
        for _ in range(1000):  # until the server closes (recv returns b"")
            data = sock.recv(65536)
            if not data:
                break
            received += data
    headers, _, chunked = received.partition(b"\r\n\r\n")
    assert b"200 OK" in headers
    assert b"connection: close" not in headers.lower()  # announced: no client would reuse it
    assert b"data: [DONE]" in chunked
    assert chunked.endswith(b"0\r\n\r\n")  # the whole stream, then the close


def test_status_fails_every_completion(start_simulator, wire):
    sim = start_simulator(status=503)
    http = wire.http(sim)
    request = {"model": "m", "messages": HELLO}
    response = http.post("/v1/chat/completions", json=request)
    assert response.status_code == 503
    assert response.json() == {
        "error": {
            "message": "simulated failure (status 503)",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    ollama = http.post("/api/chat", json=request)
    assert (ollama.status_code, ollama.json()) == (503, {"error": "simulated failure (status 503)"})
    with pytest.raises(openai.InternalServerError):
        wire.openai(sim).chat.completions.create(model="m", messages=HELLO)
    assert http.get("/v1/models").status_code == 200


def test_status_429_maps_to_the_sdks_rate_limit_error(start_simulator, wire):
    sim = start_simulator(status=429)
    with pytest.raises(openai.RateLimitError):
        wire.openai(sim).chat.completions.create(model="m", messages=HELLO)


def test_an_abandoned_slow_stream_stops_with_its_client(start_simulator, wire):
    # 2,000 chunks 20 ms apart: left alone, the stream would run for 40 s.
    sim = start_simulator({"rules": [{"answer": {"content": "x" * 2000}}]}, chunk=1, delay_ms=20)
    request = {"model": "m", "messages": HELLO, "stream": True}
    with wire.http(sim).stream("POST", "/v1/chat/completions", json=request) as response:
        for number, _ in enumerate(response.iter_lines()):
            if number == 3:
                assert sim.active_requests == 1  # the count sees a running stream
                break
    deadline = time.monotonic() + 10
    while sim.active_requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sim.active_requests == 0, "the stream kept running after its client left"


TWO_CALLS = {
    "rules": [
        {
            "answer": {
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                ]
            }
        }
    ]
}


@pytest.mark.parametrize("honour", [True, False])
def test_honour_parallel_tool_calls(start_simulator, wire, weather_tool, honour):
    sim = start_simulator(TWO_CALLS, honour_parallel_tool_calls=honour)
    client = wire.openai(sim)
    request = {"model": "m", "messages": HELLO, "tools": [weather_tool]}
    allowed = client.chat.completions.create(**request)
    assert len(allowed.choices[0].message.tool_calls or []) == 2
    single = client.chat.completions.create(**request, parallel_tool_calls=False)
    cities = [c.function.arguments for c in single.choices[0].message.tool_calls or []]
    assert cities == (['{"city":"Paris"}'] if honour else ['{"city":"Paris"}', '{"city":"Tokyo"}'])


def test_reasoning_open_starts_the_answer_inside_the_reasoning(start_simulator, wire):
    sim = start_simulator(TAGGED, reasoning_open=True)
    http = wire.http(sim)
    request = {"model": "m", "messages": HELLO}
    message = http.post("/v1/chat/completions", json=request).json()["choices"][0]["message"]
    # No reasoning field and no opening tag: the template wrote <think> into the prompt.
    assert message == {
        "role": "assistant",
        "content": "I should call the tool.</think>\n\nLet me check.<tool_call>\n"
        '{"name": "get_weather"}\n</tool_call>',
    }
    plain = start_simulator({"rules": [{"answer": {"content": "Hi."}}]}, reasoning_open=True)
    ollama = wire.http(plain).post("/api/chat", json=request | {"stream": False}).json()
    assert ollama["message"]["content"] == "Let me think about this.</think>\n\nHi."
    assert "thinking" not in ollama["message"]


def test_cut_streamed_arguments_loses_the_end_of_streamed_calls_only(
    start_simulator, wire, weather_tool, weather_question
):
    sim = start_simulator(cut_streamed_arguments=2)
    http = wire.http(sim)
    request = {"model": "m", "messages": weather_question, "tools": [weather_tool]}
    payloads = wire.sse(http.post("/v1/chat/completions", json=request | {"stream": True}).text)
    streamed = "".join(
        call["function"].get("arguments", "")
        for p in payloads[:-1]
        for call in p["choices"][0]["delta"].get("tool_calls", [])
    )
    assert streamed == '{"city":"Paris'
    assert payloads[-2]["choices"][0]["finish_reason"] == "tool_calls"
    whole = http.post("/v1/chat/completions", json=request).json()
    assert whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == (
        '{"city":"Paris"}'
    )
