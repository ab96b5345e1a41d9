"""What the gateway says in its log: one line per request, facts learned,
fallbacks taken, backends that do not answer, and a hint at stripped tools."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.gateway.serve_process import serve_process
from tests.gateway.support import gateway, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator, SimulatorConfig


def _messages(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_one_access_log_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with stack(gateway_settings={"tool_mode": "rescue"}) as (_, gw):
        gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
        httpx.get(gw.url + "/health", headers={"x-request-id": "abc-1"}, timeout=10)
    lines = _messages(caplog, "toolrelay.access")
    completion = next(line for line in lines if "/v1/chat/completions" in line)
    assert completion.startswith("POST /v1/chat/completions model=toolrelay-sim mode=rescue 200 ")
    assert "ms req_" in completion
    assert any(
        line.startswith("GET /health model=- mode=- 200 ") and "abc-1" in line for line in lines
    )
    record = next(r for r in caplog.records if r.name == "toolrelay.access")
    assert {"method", "path", "model", "mode", "status", "duration_ms", "request_id"} <= set(
        vars(record)
    )


def test_learned_facts_and_fallbacks_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with stack(no_tools_support=True, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
    learned = _messages(caplog, "toolrelay.backends")
    assert any("model toolrelay-sim: learned that it refuses tools" in m for m in learned), learned


def test_required_re_ask_and_unmet_requirement_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    never_calls = {"rules": [{"answer": {"content": "No."}}]}
    # A server that ignores tool_choice and constraints alike.
    with stack(never_calls, ignore_tool_choice=True, constraints="ignore") as (_, gw):
        gw.client().chat.completions.create(
            model="m", messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice="required"
        )
    rounds = [r for r in caplog.records if r.name == "toolrelay.rounds"]
    assert any("asking once more" in r.getMessage() for r in rounds)
    assert any(r.levelno == logging.WARNING and "required" in r.getMessage() for r in rounds)


def test_a_backend_that_does_not_answer_is_a_startup_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}/v1"
    with gateway(dead):
        deadline = time.monotonic() + 10
        while not _messages(caplog, "toolrelay.gateway") and time.monotonic() < deadline:
            time.sleep(0.02)
    warning = next(r for r in caplog.records if r.name == "toolrelay.gateway")
    assert warning.levelno == logging.WARNING
    assert dead in warning.getMessage() and "does not answer" in warning.getMessage()


def test_stripped_tools_get_a_hint_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with stack(strip_tools=True, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        client = gw.client()
        for _ in range(5):
            reply = client.chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
            assert not reply.choices[0].message.tool_calls
    hints = [m for m in _messages(caplog, "toolrelay.rounds") if "strips `tools`" in m]
    assert len(hints) == 1, hints
    assert "--tool-mode rescue" in hints[0] and "toolrelay doctor" in hints[0]


def test_a_model_that_calls_gets_no_hint(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with stack(gateway_settings={"backend_kind": "openai"}) as (_, gw):
        client = gw.client()
        for question in ("hello", "What's the weather in Paris?", "hi", "hey", "yo"):
            client.chat.completions.create(
                model="toolrelay-sim",
                messages=[{"role": "user", "content": question}],
                tools=[WEATHER_TOOL],
            )
    assert not [m for m in _messages(caplog, "toolrelay.rounds") if "strips `tools`" in m]


def test_serve_logs_json_lines(tmp_path: object) -> None:
    with Simulator(SimulatorConfig()) as sim:
        args = ("--backend", sim.openai_url, "--log-format", "json")
        with serve_process(*args) as served:
            httpx.get(served.url + "/health", timeout=30)
    stderr = served.log
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    access = next(r for r in records if r["logger"] == "toolrelay.access")
    assert access["path"] == "/health" and access["status"] == 200
    assert any(r["logger"] == "toolrelay.gateway" and "answers" in r["message"] for r in records)


def test_a_bad_setting_names_the_variable_and_the_allowed_values() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "serve"],
        env={"TOOLRELAY_STUCK_MODE": "bogus", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    problem = done.stderr.splitlines()[-1]
    assert "TOOLRELAY_STUCK_MODE" in problem and "'enforce', 'observe' or 'off'" in problem
    assert "bogus" in problem and "pydantic" not in done.stderr


def test_version_and_serve_help() -> None:
    def toolrelay(*arguments: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "toolrelay", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout

    assert toolrelay("--version").startswith("toolrelay ")
    help_text = toolrelay("serve", "--help")
    assert "TOOLRELAY_STUCK_MODE" in help_text and "docs/gateway.md" in help_text
    assert "one line per request" in help_text  # --log-level explains itself
    assert "(default: 4)" in toolrelay("simulate", "--help")
