"""Model names clients insist on: aliases, globs and the ``--model`` catch-all.

On all three fronts, with the official SDKs: Claude Code's model names
(``claude-sonnet-4-5-…``, the haiku model of its warm-up requests) and
Codex's (``gpt-5-codex``) reach the backend as the model it serves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from pydantic import ValidationError

from tests.gateway.support import GatewayServer, stack
from toolrelay.io.models import ModelNames, parse_alias
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator

SCENARIO: dict[str, Any] = {
    "models": ["qwen3-coder", "gpt-oss-120b"],
    "rules": [{"answer": {"content": "Hello from the model."}}],
}
Pair = tuple[Simulator, GatewayServer]


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    settings = {
        "backend_kind": "openai",
        "model": "qwen3-coder",
        "model_alias": ["claude-*=qwen3-coder", "gpt-5-codex=gpt-oss-120b"],
    }
    with stack(SCENARIO, gateway_settings=settings) as both:
        _wait_for_listing(both[1])
        yield both


def _wait_for_listing(gw: GatewayServer) -> None:
    """The gateway reads the backend's model list at startup, in the background."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        served = httpx.get(gw.url + "/health", timeout=5).json()["model_names"]["served"]
        if served:
            return
        time.sleep(0.05)
    raise AssertionError("the gateway never read the backend's model list")


def test_claude_names_reach_the_backend_as_its_model(pair: Pair) -> None:
    sim, gw = pair
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-test", max_retries=0)
    for name in ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"):
        message = client.messages.create(
            model=name, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
        assert message.content[0].type == "text"
        assert sim.requests[-1].body["model"] == "qwen3-coder"
    used = httpx.get(gw.url + "/health", timeout=5).json()["model_names"]["used"]
    assert {"client": "claude-haiku-4-5-20251001", "model": "qwen3-coder", "requests": 1} in used


def test_codex_name_on_responses_and_chat(pair: Pair) -> None:
    sim, gw = pair
    client = gw.client()
    response = client.responses.create(model="gpt-5-codex", input="hi")
    assert response.output_text == "Hello from the model."
    assert sim.requests[-1].body["model"] == "gpt-oss-120b"
    reply = client.chat.completions.create(
        model="gpt-5-codex", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "Hello from the model."
    assert sim.requests[-1].body["model"] == "gpt-oss-120b"


def test_served_names_pass_and_others_take_the_catch_all(pair: Pair) -> None:
    sim, gw = pair
    client = gw.client()
    client.chat.completions.create(
        model="gpt-oss-120b", messages=[{"role": "user", "content": "x"}]
    )
    assert sim.requests[-1].body["model"] == "gpt-oss-120b"
    client.chat.completions.create(model="llama-99b", messages=[{"role": "user", "content": "x"}])
    assert sim.requests[-1].body["model"] == "qwen3-coder"


def test_models_lists_the_backend_and_the_aliases(pair: Pair) -> None:
    _, gw = pair
    listed = {model.id: model for model in gw.client().models.list()}
    assert {"qwen3-coder", "gpt-oss-120b", "gpt-5-codex"} <= set(listed)
    assert (listed["gpt-5-codex"].model_extra or {})["toolrelay_alias_of"] == "gpt-oss-120b"
    assert "claude-*" not in listed
    health = httpx.get(gw.url + "/health", timeout=5).json()["model_names"]
    assert health["catch_all"] == "qwen3-coder"
    assert health["aliases"][0] == {"client": "claude-*", "model": "qwen3-coder"}


def test_resolution_order() -> None:
    names = ModelNames(
        [("claude-*", "glob"), ("claude-opus-4", "exact"), ("c*", "later-glob")], "fallback"
    )
    names.learn_served({"data": [{"id": "served"}, {"id": 3}, "junk"]})
    assert names.resolve("claude-opus-4").model == "exact"  # an exact name beats a glob
    assert names.resolve("claude-haiku").model == "glob"  # globs in their order
    assert names.resolve("cx").model == "later-glob"
    assert names.resolve("served").model == "served"
    assert names.resolve("unknown").model == "fallback"
    assert names.resolve("Claude-opus-4").how == "catch_all"  # case-sensitive
    assert ModelNames([], None).resolve("anything").how == "as_is"


def test_aliases_from_flags_environment_and_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "toolrelay.yaml"
    config.write_text(
        "models:\n  'claude-*': from-file\n  gpt-5: other\n  from-file:\n    tool_mode: rescue\n"
    )
    settings = Settings(config=str(config))
    assert settings.model_alias == ["claude-*=from-file", "gpt-5=other"]
    assert settings.override_for("from-file").tool_mode == "rescue"
    assert settings.model_names.resolve("claude-x").model == "from-file"
    flagged = Settings(config=str(config), model_alias=["claude-*=from-flag"])
    assert flagged.model_names.resolve("claude-x").model == "from-flag"
    monkeypatch.setenv("TOOLRELAY_MODEL_ALIAS", "a=b, c*=d")
    assert Settings().model_alias == ["a=b", "c*=d"]
    with pytest.raises(ValidationError, match="CLIENT_NAME=BACKEND_MODEL"):
        Settings(model_alias=["no-equals-sign"])
    with pytest.raises(ValueError):
        parse_alias("=x")
