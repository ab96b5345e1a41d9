"""Settings: flags over environment over config file, several backends, per-model
overrides, forced model, sampling profiles, and the serve command itself."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.gateway.support import GatewayServer, gateway
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.cli import main as cli_main
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig


def _config(tmp_path: Path, data: object, suffix: str = ".yaml") -> str:
    path = tmp_path / f"toolrelay{suffix}"
    path.write_text(yaml.safe_dump(data) if suffix == ".yaml" else json.dumps(data))
    return str(path)


def test_precedence_flags_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, {"port": 9001, "tool_mode": "rescue", "host": "127.0.0.2"})
    monkeypatch.setenv("TOOLRELAY_PORT", "9002")
    settings = Settings(config=path)
    assert settings.port == 9002  # the environment beats the file
    assert settings.tool_mode == "rescue" and settings.host == "127.0.0.2"
    assert Settings(config=path, port=9003).port == 9003  # flags beat both
    monkeypatch.setenv("TOOLRELAY_CONFIG", path)
    assert Settings().tool_mode == "rescue"


def test_json_config_and_unknown_keys(tmp_path: Path) -> None:
    path = _config(tmp_path, {"models": {"m": {"tool_mode": "native"}}}, ".json")
    assert Settings(config=path).override_for("m").tool_mode == "native"
    bad = _config(tmp_path, {"modles": {}})
    with pytest.raises(ValueError):
        Settings(config=bad)


def test_several_backends_and_per_model_overrides(tmp_path: Path) -> None:
    with (
        Simulator(SimulatorConfig()) as first,
        Simulator(SimulatorConfig(no_tools_support=True)) as second,
    ):
        path = _config(
            tmp_path,
            {
                "backends": [
                    {"name": "main", "url": first.openai_url, "kind": "openai"},
                    {"name": "small", "url": second.openai_url, "kind": "ollama"},
                ],
                "models": {
                    "tiny": {"backend": "small", "profile": "graded"},
                    "forced-rescue": {"tool_mode": "rescue"},
                },
            },
        )
        with gateway(first.openai_url, config=path) as gw:
            client = gw.client()
            client.chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
            # (The gateway's startup check also asks each backend what it is.)
            completions = [r for r in first.requests if r.path.endswith("/chat/completions")]
            assert len(completions) == 1
            assert not [r for r in second.requests if r.path.endswith("/chat/completions")]
            reply = client.chat.completions.create(
                model="tiny", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
            # The small backend has no tools: detected through /api/show, rescued.
            assert reply.choices[0].message.tool_calls
            sent = second.requests[-1].body
            assert "tools" not in sent and sent["temperature"] == 0.01
            client.chat.completions.create(
                model="forced-rescue", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
            assert "tools" not in first.requests[-1].body
            health = httpx.get(gw.url + "/health", timeout=10).json()
            assert [b["name"] for b in health["backends"]] == ["default", "main", "small"]


def test_forced_model_and_request_profile() -> None:
    with (
        Simulator(SimulatorConfig()) as sim,
        gateway(sim.openai_url, backend_kind="vllm", model="toolrelay-sim") as gw,
    ):
        gw.client().chat.completions.create(
            model="whatever",
            messages=ASK_WEATHER,
            temperature=0.3,
            extra_body={"toolrelay_profile": "antiloop"},
        )
        sent = sim.requests[-1].body
        assert sent["model"] == "toolrelay-sim"
        assert "toolrelay_profile" not in sent
        # Explicit request values win; the rest comes from the profile, in vLLM's names.
        assert sent["temperature"] == 0.3 and sent["top_p"] == 0.8
        assert sent["repetition_penalty"] == 1.15 and "repeat_last_n" not in sent


def test_serve_rejects_bad_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _config(tmp_path, {"tool_mode": "sometimes"})
    assert cli_main(["serve", "--config", bad]) == 2
    assert "invalid settings" in capsys.readouterr().err


def test_serve_rejects_a_config_file_that_does_not_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in (("bad.yaml", "port: [8787\nbackends: {\n"), ("bad.json", '{"port": ')):
        path = tmp_path / name
        path.write_text(text)
        # A malformed YAML file used to end the command with a traceback.
        assert cli_main(["serve", "--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert "invalid settings" in err and name in err


def test_a_model_routed_to_an_unknown_backend_is_rejected() -> None:
    backends = [{"name": "gpu", "url": "http://127.0.0.1:9/v1"}]
    # It used to fall back to the default backend without a word.
    with pytest.raises(ValueError, match="no backend is named 'gpus'"):
        Settings(backends=backends, models={"m": {"backend": "gpus"}})
    settings = Settings(backends=backends, models={"m": {"backend": "gpu"}})
    assert settings.override_for("m").backend == "gpu"
    assert Settings(models={"m": {"backend": "default"}}).override_for("m").backend == "default"


def test_serve_rejects_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    # Unchecked, 70000 was bound as port 4464 while the banner announced 70000.
    with pytest.raises(ValueError, match="port"):
        Settings(port=70000)
    with pytest.raises(ValueError, match="port"):
        Settings(port=-1)
    assert cli_main(["serve", "--port", "70000"]) == 2
    assert "port" in capsys.readouterr().err


def test_serve_command_answers_health_with_backend_down() -> None:
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    backend, port = ports
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolrelay",
            "serve",
            "--backend",
            f"http://127.0.0.1:{backend}/v1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert health["status"] == "degraded"
        assert health["settings"]["port"] == port
    finally:
        proc.terminate()
        proc.wait(10)


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        Settings(format="nope")
    with pytest.raises(ValueError, match="unknown format"):
        Settings(models={"m": {"format": "nope"}})
    assert Settings(models={"m": {"format": "hermes"}}).override_for("m").format == "hermes"


def test_unknown_profile_is_rejected_at_startup() -> None:
    with pytest.raises(ValueError, match="unknown sampling profile"):
        Settings(profile="fast")
    with pytest.raises(ValueError, match="unknown sampling profile"):
        Settings(models={"m": {"profile": "fast"}})


def test_health_shows_only_the_backends_in_force(tmp_path: Path) -> None:
    with Simulator(SimulatorConfig()) as sim:
        url = sim.openai_url
        path = _config(tmp_path, {"backends": [{"name": "only", "url": url}]})
        with GatewayServer(Settings(config=path)) as gw:
            health = httpx.get(gw.url + "/health", timeout=10).json()
    shown = health["settings"]
    assert "backend" not in shown and "backend_kind" not in shown, "no unused default URL"
    assert [b["url"] for b in shown["backends"]] == [url]
    assert isinstance(health["counters"]["text_calls"], int)
    assert isinstance(health["counters"]["requests"], dict)


def test_force_manual_tools_is_seed_000s_name_for_rescue(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {
            "backends": [
                {"name": "nehanda", "url": "http://10.0.0.7/v1", "force_manual_tools": True}
            ],
            "models": {
                "qwen3": {"force_manual_tools": True},
                "llama": {"force_manual_tools": False},
            },
        },
    )
    settings = Settings(config=path)
    assert settings.backend_configs()[0].tool_mode == "rescue"
    assert settings.round_options("qwen3")["tool_mode"] == "rescue"
    assert settings.round_options("llama")["tool_mode"] is None
    with pytest.raises(ValueError, match="force_manual_tools: true contradicts tool_mode: native"):
        Settings(models={"m": {"force_manual_tools": True, "tool_mode": "native"}})


def test_a_forced_manual_model_is_rescued_through_the_gateway(tmp_path: Path) -> None:
    path = _config(tmp_path, {"models": {"toolrelay-sim": {"force_manual_tools": True}}})
    with Simulator() as sim, GatewayServer(Settings(config=path, backend=sim.openai_url)) as gw:
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
        (call,) = reply.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather"
        assert "tools" not in sim.requests[-1].body


def test_format_and_profile_per_backend_under_the_models_own(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {
            "format": "bracket",
            "backends": [
                {"name": "gpu", "url": "http://10.0.0.5/v1", "format": "hermes",
                 "profile": "vendor", "models": ["qwen3"]},
                {"name": "laptop", "url": "http://127.0.0.1:11434/v1"},
            ],
            "models": {
                "own": {"backend": "gpu", "format": "qwen3_coder", "profile": "graded"},
                "small": {"backend": "laptop"},
            },
        },
    )  # fmt: skip
    settings = Settings(config=path)
    options = {m: settings.round_options(m) for m in ("qwen3", "own", "small", "unlisted")}
    assert {m: (o["format"], o["profile"]) for m, o in options.items()} == {
        "qwen3": ("hermes", "vendor"),
        "own": ("qwen3_coder", "graded"),
        "small": ("bracket", None),
        "unlisted": ("hermes", "vendor"),  # the first backend is the default
    }
    assert [settings.backend_config_for(m).name for m in options] == ["gpu", "gpu", "laptop", "gpu"]
