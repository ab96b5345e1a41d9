"""``toolrelay chat`` one-shot against the simulator: a multi-round file task
through every failure mode, HTTP tools beside the built-in ones, the config
file's provider rules, and a real process reading standard input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.cli.chat_scenario import ANSWER, ASK_NOTES, NOTES, NOTES_TASK
from toolrelay.cli import main
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture
def chat(capsys: pytest.CaptureFixture[str], workdir: Path) -> Iterator[Any]:
    """chat(*args, scenario=NOTES_TASK, **switches) -> (status, stdout, stderr, simulator)."""

    def go(*args: str, scenario: Any = NOTES_TASK, **switches: Any) -> tuple[int, str, str, Any]:
        with Simulator(SimulatorConfig.load(scenario, **switches)) as sim:
            status = main(["chat", "--backend", sim.openai_url, "--workdir", str(workdir), *args])
        out, err = capsys.readouterr()
        return status, out, err, sim

    yield go


def completion_bodies(sim: Simulator) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.path.endswith("/chat/completions")]


def test_a_multi_round_task_native(chat: Any) -> None:
    status, out, err, sim = chat("-m", ASK_NOTES)
    assert status == 0, err
    assert out == ANSWER  # the answer alone on stdout
    assert 'Let me look.\n⚙ list_directory {"path": "."}  · native\n' in err
    assert "↳ notes.txt (18 bytes)" in err
    assert '⚙ read_file {"path": "notes.txt"}  · native' in err
    assert "· native · 3 rounds ·" in err
    bodies = completion_bodies(sim)
    assert [len(b["tools"]) for b in bodies] == [5, 5, 5]
    assert bodies[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": bodies[-1]["messages"][-2]["tool_calls"][0]["id"],
        "content": NOTES,
    }


def test_the_rescue_path_when_asked_for(chat: Any) -> None:
    status, out, err, sim = chat("-m", ASK_NOTES, "--tool-mode", "rescue", strip_tools=True)
    assert status == 0, err
    assert out == ANSWER
    assert "· rescue\n" in err and "· rescue · 3 rounds" in err
    first = completion_bodies(sim)[0]
    assert "tools" not in first
    assert "[SYSTEM DIRECTIVE]" in first["messages"][-1]["content"]
    assert "[TOOL_CALL]" in first["messages"][0]["content"]


def test_a_model_that_refuses_tools_falls_back_to_rescue(chat: Any) -> None:
    # The simulator answers Ollama's /api/show: "no tools" is known before asking.
    status, out, err, _ = chat("-m", ASK_NOTES, no_tools_support=True)
    assert status == 0, err
    assert out == ANSWER
    assert "· rescue · 3 rounds" in err


def test_the_refusal_itself_switches_to_rescue(chat: Any) -> None:
    # An OpenAI-compatible server that says nothing beforehand: the 400 teaches it.
    status, out, err, _ = chat("-m", ASK_NOTES, "--backend-kind", "openai", no_tools_support=True)
    assert status == 0, err
    assert out == ANSWER
    assert "· rescue; the model refused tools" in err


def test_a_stream_that_swallows_the_call(chat: Any) -> None:
    status, out, err, _ = chat("-m", ASK_NOTES, "--backend-kind", "openai",
                               swallow_streamed_calls=True)  # fmt: skip
    assert status == 0, err
    assert out == ANSWER
    assert "native; the streamed call was lost, asked again without streaming" in err


@pytest.mark.parametrize(
    "switches",
    [
        {"ignore_tool_choice": True},
        {"honour_parallel_tool_calls": True},
        {"cut_streamed_arguments": 1},
        {"reasoning_open": True},
        {"capabilities": ("completion",), "tool_mode": "native"},
        {"stop_at_tool_call_tag": True},
    ],
)
def test_other_failure_modes_still_complete_the_task(chat: Any, switches: dict[str, Any]) -> None:
    args = ["-m", ASK_NOTES]
    if switches.pop("tool_mode", None):
        args += ["--tool-mode", "native"]  # the endpoints misreport: auto would rescue
    status, out, err, _ = chat(*args, **switches)
    assert status == 0, err
    assert out.endswith(ANSWER)
    assert "⚙ read_file" in err


def test_a_broken_stream_is_an_error_exit(chat: Any) -> None:
    status, out, err, _ = chat("-m", ASK_NOTES, fail_after_chunks=2)
    assert status == 1
    assert out == ""
    assert "toolrelay chat: the backend failed:" in err


def test_a_failing_backend_is_an_error_exit(chat: Any) -> None:
    status, _, err, _ = chat("-m", "hello", status=500)
    assert status == 1
    assert "simulated failure (status 500)" in err


def test_seed_000s_rules_in_the_config_file(chat: Any, tmp_path: Path) -> None:
    # A proxy strips tools, and the provider is configured for manual tools.
    config = tmp_path / "toolrelay.yaml"
    config.write_text(yaml.safe_dump({"models": {"toolrelay-sim": {"force_manual_tools": True}}}))
    status, out, err, sim = chat("-m", ASK_NOTES, "--config", str(config), strip_tools=True)
    assert status == 0, err
    assert out == ANSWER
    assert all("tools" not in body for body in completion_bodies(sim))


def test_omit_tool_choice_from_the_config_file(chat: Any, tmp_path: Path) -> None:
    config = tmp_path / "toolrelay.yaml"
    config.write_text(yaml.safe_dump({"models": {"toolrelay-sim": {"omit_tool_choice": True}}}))
    status, _, err, sim = chat("-m", ASK_NOTES, "--config", str(config))
    assert status == 0, err
    assert all("tool_choice" not in body for body in completion_bodies(sim))


def test_doctor_save_then_chat_with_it(
    capsys: pytest.CaptureFixture[str], workdir: Path, tmp_path: Path
) -> None:
    # Seed 000's deployment: vLLM stops at <tool_call> and a proxy strips tools.
    scenario = {**NOTES_TASK, "settings": {"stop_at_tool_call_tag": True, "strip_tools": True}}
    config = tmp_path / "toolrelay.yaml"
    with Simulator(SimulatorConfig.load(scenario)) as sim:
        assert main(["doctor", "--backend", sim.openai_url, "--save", str(config)]) == 0
        capsys.readouterr()
        status = main(["chat", "--config", str(config), "--workdir", str(workdir), "-m", ASK_NOTES])
    out, err = capsys.readouterr()
    assert yaml.safe_load(config.read_text())["models"]["toolrelay-sim"]["tool_mode"] == "rescue"
    assert status == 0, err
    assert out == ANSWER


def _weather_service() -> Starlette:
    async def weather(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"{request.path_params['city']}: 18°C")

    return Starlette(routes=[Route("/weather/{city}", weather)])


def test_http_tools_beside_the_builtin_ones(chat: Any, tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    with BackgroundServer(_weather_service()) as service:
        tools.write_text(
            json.dumps(
                [
                    {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                        "url": service.url + "/weather/{city}",
                        "method": "GET",
                    }
                ]
            )
        )
        status, out, err, sim = chat("-m", "What's the weather in Oslo?", "--tools", str(tools))
    assert status == 0, err
    assert out == "Weather: Oslo: 18°C\n"
    names = [t["function"]["name"] for t in completion_bodies(sim)[0]["tools"]]
    assert names == [
        "read_file", "list_directory", "search_files", "write_file", "run_command", "get_weather",
    ]  # fmt: skip


def test_no_builtins_leaves_only_the_http_tools(chat: Any, tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "ping", "url": "http://127.0.0.1:9/ping"}]))
    status, _, err, sim = chat("-m", "hello", "--tools", str(tools), "--no-builtins")
    assert status == 0, err
    assert [t["function"]["name"] for t in completion_bodies(sim)[0]["tools"]] == ["ping"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not valid JSON"),
        ('[{"name": "x"}]', "'url'"),
        (
            '[{"name": "read_file", "url": "http://127.0.0.1:9/"}]',
            "two tools are named 'read_file'",
        ),
    ],
)
def test_a_bad_tools_file_is_a_usage_error(
    chat: Any, tmp_path: Path, content: str, message: str
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(content)
    status, _, err, sim = chat("-m", "hello", "--tools", str(tools))
    assert status == 2
    assert message in err and str(tools) in err
    assert completion_bodies(sim) == []


def test_commands_need_a_yes_when_nobody_can_be_asked(chat: Any, workdir: Path) -> None:
    status, out, err, _ = chat("-m", "run touch made-it")
    assert status == 0, err
    assert "nobody can confirm it" in out
    assert not (workdir / "made-it").exists()
    status, out, err, _ = chat("-m", "run touch made-it", "--yes")
    assert status == 0, err
    assert out.startswith("The command said: exit status 0")
    assert (workdir / "made-it").exists()


def test_the_real_command_reads_standard_input(workdir: Path) -> None:
    with Simulator(SimulatorConfig.load(NOTES_TASK)) as sim:
        done = subprocess.run(
            [sys.executable, "-m", "toolrelay", "chat", "--backend", sim.openai_url],
            input=ASK_NOTES,
            capture_output=True,
            text=True,
            cwd=workdir,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER
    assert "⚙ list_directory" in done.stderr
    assert "\x1b[" not in done.stdout + done.stderr, "plain output off a terminal"


def test_nothing_to_ask_and_an_unreachable_backend(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    assert main(["chat", "--backend", "http://127.0.0.1:9/v1", "-m", "hi"]) == 1
    assert "cannot use the backend at http://127.0.0.1:9/v1" in capsys.readouterr().err
    with Simulator() as sim:
        assert main(["chat", "--backend", sim.openai_url, "-m", "  "]) == 2
    assert "nothing to ask" in capsys.readouterr().err


def test_the_loop_guard_shows_in_the_trace(chat: Any) -> None:
    stuck = {
        "rules": [
            {"match": {"tools": "native"},
             "answer": {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}},
            {"answer": {"content": "I kept reading the same file."}},
        ]
    }  # fmt: skip
    status, out, err, _ = chat("-m", ASK_NOTES, scenario=stuck)
    assert status == 0, err
    assert out == "I kept reading the same file.\n"
    assert "⚠ loop guard: identical_call ×3 on read_file (nudge)" in err
    assert "blocked by the loop guard" in err
