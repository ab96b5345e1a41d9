"""A model's configured options reach its rounds from every entry point.

Each front (Chat Completions, Messages, Responses), the ``/ws`` agent session
and ``toolrelay chat`` build their round with ``toolrelay.io.round.build_round``.
The option checked is the model's sampling profile: what the backend receives
shows it (vLLM's spelling of ``antiloop``). ``/ws`` used to build its round
without the model's options.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
import websockets.sync.client

from tests.gateway.support import gateway
from toolrelay.cli import main
from toolrelay.simulator import Simulator, SimulatorConfig

MODEL = "toolrelay-sim"
CONFIGURED: dict[str, Any] = {"backend_kind": "vllm", "models": {MODEL: {"profile": "antiloop"}}}
HELLO = "Say hello."


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig()) as running:
        yield running


def _profiled(body: dict[str, Any]) -> bool:
    """Whether the backend got the ``antiloop`` profile in vLLM's names."""
    return body.get("top_p") == 0.8 and body.get("repetition_penalty") == 1.15


def _last_completion(sim: Simulator) -> dict[str, Any]:
    bodies = [r.body for r in sim.requests if r.path.endswith("/chat/completions")]
    assert bodies, "the backend got no chat completion"
    return bodies[-1]


def test_chat_completions(sim: Simulator) -> None:
    with gateway(sim.openai_url, **CONFIGURED) as gw:
        gw.client().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": HELLO}]
        )
    assert _profiled(_last_completion(sim))


def test_messages(sim: Simulator) -> None:
    with gateway(sim.openai_url, **CONFIGURED) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="none", max_retries=0)
        client.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": HELLO}]
        )
    assert _profiled(_last_completion(sim))


def test_responses(sim: Simulator) -> None:
    with gateway(sim.openai_url, **CONFIGURED) as gw:
        gw.client().responses.create(model=MODEL, input=HELLO)
    assert _profiled(_last_completion(sim))


def test_ws_agent_session(sim: Simulator) -> None:
    with (
        gateway(sim.openai_url, model=MODEL, **CONFIGURED) as gw,
        websockets.sync.client.connect(gw.url.replace("http", "ws", 1) + "/ws") as ws,
    ):
        ws.send(json.dumps({"type": "user_text", "text": HELLO}))
        while (event := json.loads(ws.recv(timeout=20)))["type"] != "assistant_end":
            assert event["type"] != "error", event
    assert event["finish_reason"] != "error"
    assert _profiled(_last_completion(sim))


def test_toolrelay_chat(sim: Simulator, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIGURED), encoding="utf-8")
    args = ["--backend", sim.openai_url, "--config", str(config), "--model", MODEL]
    status = main(["chat", *args, "--workdir", str(tmp_path), "--no-builtins", "-m", HELLO])
    assert status == 0
    assert _profiled(_last_completion(sim))
