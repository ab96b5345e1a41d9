"""Ollama's native API over real HTTP: /api/chat (NDJSON and not), /api/show, /api/tags."""

from __future__ import annotations

STATS = {
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
}


def test_chat_non_streaming_native_call(default_sim, wire, weather_tool, weather_question):
    request = {"model": "qwen3:8b", "messages": weather_question, "tools": [weather_tool]}
    response = wire.http(default_sim).post("/api/chat", json=request | {"stream": False})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"model", "created_at", "message", "done", "done_reason"} | STATS
    assert body["model"] == "sim/qwen3:8b"
    assert body["created_at"].endswith("Z")
    assert (body["done"], body["done_reason"]) == (True, "stop")
    assert all(isinstance(body[key], int) and body[key] > 0 for key in STATS)
    assert body["total_duration"] == (
        body["load_duration"] + body["prompt_eval_duration"] + body["eval_duration"]
    )
    message = body["message"]
    assert (message["role"], message["content"]) == ("assistant", "")
    [call] = message["tool_calls"]
    assert call["id"].startswith("call_")
    assert call["function"] == {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}


def test_chat_streams_ndjson_by_default(default_sim, wire):
    request = {"model": "m", "messages": [{"role": "user", "content": "Hello there"}]}
    response = wire.http(default_sim).post("/api/chat", json=request)
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = wire.ndjson(response.text)
    *parts, last = lines
    assert len(parts) > 1
    for line in parts:
        assert set(line) == {"model", "created_at", "message", "done"}
        assert line["done"] is False
        assert line["message"]["role"] == "assistant"
    text = "".join(line["message"]["content"] for line in parts)
    assert (
        text == "This is the toolrelay simulator, a test double for a model. You said: Hello there"
    )
    assert last["done"] is True and last["done_reason"] == "stop"
    assert last["message"] == {"role": "assistant", "content": ""}
    assert set(last) >= STATS


def test_streamed_call_comes_whole(default_sim, wire, weather_tool, weather_question):
    request = {"model": "m", "messages": weather_question, "tools": [weather_tool], "stream": True}
    lines = wire.ndjson(wire.http(default_sim).post("/api/chat", json=request).text)
    assert len(lines) == 2
    [call] = lines[0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == {"city": "Paris"}
    assert lines[1]["done"] is True


def test_thinking_and_tool_result_by_tool_name(start_simulator, wire):
    scenario = {
        "rules": [
            {
                "match": {"tool_result": True},
                "answer": {
                    "reasoning": "Got it.",
                    "content": "{tool_name} said {last_tool_result}",
                },
            },
            {"answer": {"content": "no"}},
        ]
    }
    sim = start_simulator(scenario, chunk=100)
    messages = [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}],
        },
        {"role": "tool", "tool_name": "get_time", "content": "12:00"},
    ]
    http = wire.http(sim)
    body = http.post("/api/chat", json={"model": "m", "messages": messages, "stream": False}).json()
    assert body["message"] == {
        "role": "assistant",
        "content": "get_time said 12:00",
        "thinking": "Got it.",
    }
    lines = wire.ndjson(http.post("/api/chat", json={"model": "m", "messages": messages}).text)
    assert lines[0]["message"] == {"role": "assistant", "content": "", "thinking": "Got it."}
    assert lines[1]["message"] == {"role": "assistant", "content": "get_time said 12:00"}


def test_show_reports_tools_by_default(default_sim, wire):
    response = wire.http(default_sim).post("/api/show", json={"model": "qwen3:8b"})
    assert response.status_code == 200
    body = response.json()
    assert body["capabilities"] == ["completion", "tools"]
    assert ".Tools" in body["template"]
    assert {"modelfile", "parameters", "template", "details", "model_info", "modified_at"} <= set(
        body
    )
    assert body["details"]["format"] == "gguf"


def test_show_accepts_the_old_name_field(default_sim, wire):
    response = wire.http(default_sim).post("/api/show", json={"name": "llama3"})
    assert response.json()["capabilities"] == ["completion", "tools"]


def test_show_without_model_is_an_ollama_error(default_sim, wire):
    response = wire.http(default_sim).post("/api/show", json={})
    assert (response.status_code, response.json()) == (400, {"error": "model is required"})


def test_tags_lists_the_scenario_models(start_simulator, wire):
    sim = start_simulator({"models": ["a:1b", "b"], "rules": [{"answer": {"content": "x"}}]})
    body = wire.http(sim).get("/api/tags").json()
    assert [m["name"] for m in body["models"]] == ["a:1b", "b"]
    for model in body["models"]:
        assert set(model) == {"name", "model", "modified_at", "size", "digest", "details"}
        assert model["model"] == model["name"]
        assert len(model["digest"]) == 64
