"""Capability probes of other servers: llama.cpp's /props and LM Studio's /api/v1/models."""

from __future__ import annotations

SCENARIO = {
    "models": ["qwen3:8b", {"name": "gemma:2b", "tools": False}],
    "rules": [{"answer": {"content": "ok"}}],
}


def test_props_reports_template_caps(start_simulator, wire):
    http = wire.http(start_simulator(SCENARIO))
    body = http.get("/props").json()
    assert body["model_alias"] == "qwen3:8b"
    assert body["default_generation_settings"]["n_ctx"] > 0
    caps = body["chat_template_caps"]
    assert caps["supports_tools"] is True and caps["supports_tool_calls"] is True
    assert "tools" in body["chat_template"]
    other = http.get("/props", params={"model": "gemma:2b"}).json()
    assert other["chat_template_caps"]["supports_tools"] is False
    assert "tools" not in other["chat_template"]


def test_props_without_tool_support(start_simulator, wire):
    body = wire.http(start_simulator(no_tools_support=True)).get("/props").json()
    assert body["chat_template_caps"]["supports_tools"] is False


def test_lmstudio_models_say_which_are_trained_for_tool_use(start_simulator, wire):
    body = wire.http(start_simulator(SCENARIO)).get("/api/v1/models").json()
    found = {m["key"]: m["capabilities"]["trained_for_tool_use"] for m in body["models"]}
    assert found == {"qwen3:8b": True, "gemma:2b": False}
    for model in body["models"]:
        assert model["type"] == "llm"
        assert model["max_context_length"] > 0


def test_per_model_tool_support_governs_chat_too(start_simulator, wire, weather_tool):
    http = wire.http(start_simulator(SCENARIO))
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": [weather_tool]}
    refused = http.post("/api/chat", json=request | {"model": "gemma:2b", "stream": False})
    assert (refused.status_code, refused.json()) == (
        400,
        {"error": "gemma:2b does not support tools"},
    )
    accepted = http.post("/api/chat", json=request | {"model": "qwen3:8b", "stream": False})
    assert accepted.status_code == 200
    show = http.post("/api/show", json={"model": "gemma:2b"}).json()
    assert show["capabilities"] == ["completion"]
