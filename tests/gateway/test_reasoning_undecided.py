"""Issue 23, item 9: the first streams of a model whose reasoning flag is unknown
(vLLM and SGLang show no template) — what may be reasoning is held back until
the text tells, so a call the model only drafted in its reasoning is never
returned, and a model that does not open reasoning is learned as such at once."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.support import stack
from tests.weather import WEATHER_TOOL

DRAFT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
DRAFTS_A_CALL = {
    "rules": [
        {
            "match": {"last_user": "(?i)weather"},
            "answer": {
                "reasoning": f"I could call {DRAFT} but I know it is sunny.",
                "content": "It is sunny in Oslo.",
            },
        }
    ]
}
PLAIN = {"rules": [{"answer": {"content": "It is sunny in Oslo."}}]}
QUESTION = [{"role": "user", "content": "What's the weather in Oslo?"}]
SETTINGS = {"backend_kind": "openai", "tool_mode": "rescue"}


def streamed(gw: Any) -> tuple[str, str, list[Any]]:
    chunks = gw.client().chat.completions.create(
        model="m", messages=QUESTION, tools=[WEATHER_TOOL], stream=True
    )
    content, reasoning, calls = [], [], []
    for chunk in chunks:
        if chunk.choices:
            delta = chunk.choices[0].delta
            content.append(delta.content or "")
            reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
            calls += delta.tool_calls or []
    return "".join(content), "".join(reasoning), calls


def opens_reasoning(gw: Any) -> Any:
    health = httpx.get(gw.url + "/health", timeout=30).json()
    return health["backends"][0]["facts"].get("m", {}).get("opens_reasoning")


def test_a_call_drafted_in_the_first_stream_s_reasoning_is_not_returned() -> None:
    with stack(DRAFTS_A_CALL, gateway_settings=SETTINGS, reasoning_open=True) as (_sim, gw):
        assert opens_reasoning(gw) is None
        content, reasoning, calls = streamed(gw)
        assert opens_reasoning(gw) is True
    assert calls == []
    assert content.strip() == "It is sunny in Oslo."
    assert reasoning.strip() == f"I could call {DRAFT} but I know it is sunny."


def test_a_model_that_does_not_open_reasoning_is_learned_from_its_first_stream() -> None:
    with stack(PLAIN, gateway_settings=SETTINGS) as (_sim, gw):
        content, reasoning, calls = streamed(gw)
        assert opens_reasoning(gw) is False  # later streams are not held back
        again, _, _ = streamed(gw)
    assert content == again == "It is sunny in Oslo."
    assert (reasoning, calls) == ("", [])
