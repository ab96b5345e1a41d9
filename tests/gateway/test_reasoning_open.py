"""Reasoning the chat template opened, per model: from the template, the config file, or
learned from the first orphan closing tag (issue 10).

The simulator's ``reasoning_open`` switch plays a server without a reasoning
parser whose template ends the prompt with ``<think>\\n``: every answer's
content starts inside the reasoning and shows only ``</think>``.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast, get_args

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gateway.support import stack
from tests.weather import WEATHER_TOOL
from toolrelay.io.backends.http import HttpClient
from toolrelay.io.backends.probe import SHOWS_TEMPLATES, chat_template
from toolrelay.io.settings import BackendKind

SCENARIO = {
    "rules": [
        {
            "match": {"last_user": "(?i)weather"},
            "answer": {
                "reasoning": "The user wants Oslo's weather; I know it is sunny.",
                "content": "It is sunny in Oslo.",
            },
        }
    ]
}
QUESTION = [{"role": "user", "content": "What's the weather in Oslo?"}]
THOUGHT = "The user wants Oslo's weather; I know it is sunny."


def _streamed(gw: Any, model: str = "m") -> tuple[str, str]:
    chunks = gw.client().chat.completions.create(
        model=model, messages=QUESTION, tools=[WEATHER_TOOL], stream=True
    )
    content, reasoning = [], []
    for chunk in chunks:
        if chunk.choices:
            delta = chunk.choices[0].delta
            content.append(delta.content or "")
            reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
    return "".join(content), "".join(reasoning)


@pytest.mark.parametrize("kind", ["llamacpp", "ollama"])
def test_the_template_the_server_shows_opens_the_reasoning(kind: str) -> None:
    settings = {"backend_kind": kind, "tool_mode": "rescue"}
    with stack(SCENARIO, gateway_settings=settings, reasoning_open=True) as (_sim, gw):
        content, reasoning = _streamed(gw)
    assert content.strip() == "It is sunny in Oslo."
    assert reasoning.strip() == THOUGHT


def test_a_stream_learns_it_from_the_first_orphan_closing_tag() -> None:
    settings = {"backend_kind": "openai", "tool_mode": "rescue"}
    with stack(SCENARIO, gateway_settings=settings, reasoning_open=True) as (_sim, gw):
        first_content, first_reasoning = _streamed(gw)
        second_content, second_reasoning = _streamed(gw)
        health = httpx.get(gw.url + "/health", timeout=10).json()
    # Before the flag is known the stream holds back what may be reasoning
    # (toolrelay.undecided): the first answer is already right, the tag never shown.
    assert first_content.strip() == second_content.strip() == "It is sunny in Oslo."
    assert first_reasoning.strip() == second_reasoning.strip() == THOUGHT
    facts = [b.get("facts", {}) for b in health["backends"]]
    assert any(f.get("m", {}).get("opens_reasoning") for f in facts), health["backends"]


def test_the_config_file_says_it_for_a_model() -> None:
    settings = {
        "backend_kind": "openai",
        "tool_mode": "rescue",
        "models": {"thinker": {"reasoning_open": True}},
    }
    with stack(SCENARIO, gateway_settings=settings, reasoning_open=True) as (_sim, gw):
        content, reasoning = _streamed(gw, "thinker")
    assert content.strip() == "It is sunny in Oslo."
    assert reasoning.strip() == THOUGHT


def test_a_finished_answer_needs_no_lesson() -> None:
    settings = {"backend_kind": "openai", "tool_mode": "rescue"}
    with stack(SCENARIO, gateway_settings=settings, reasoning_open=True) as (_sim, gw):
        reply = gw.client().chat.completions.create(
            model="m", messages=QUESTION, tools=[WEATHER_TOOL]
        )
    message = reply.choices[0].message
    assert message.content == "\n\nIt is sunny in Oslo."
    assert (message.model_extra or {}).get("reasoning_content") == THOUGHT


class _Unasked:
    """A client that fails the test if a request is made through it."""

    async def request_json(self, method: str, url: str, body: Any = None, auth: Any = None) -> Any:
        raise AssertionError(f"asked {method} {url}")


@given(
    st.sampled_from([kind for kind in get_args(BackendKind) if kind not in SHOWS_TEMPLATES]),
    st.text(min_size=1, max_size=20),
)
def test_a_kind_that_shows_no_template_has_none_unasked(kind: str, model: str) -> None:
    """Backend.reasoning_open skips the template of a kind outside SHOWS_TEMPLATES:
    chat_template gives None for it without a request."""
    assert (
        asyncio.run(chat_template(cast(HttpClient, _Unasked()), "http://127.0.0.1:9", kind, model))
        is None
    )
