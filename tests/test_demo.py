"""``toolrelay demo`` as the README runs it: a real process, stdin closed, no network."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_demo_runs_the_whole_loop_offline() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # toolrelay ran the tool from its tools file and the session reported it.
    assert "tools file:" in done.stdout and "(ws)" in done.stdout
    assert "tool call  get_weather({'city': 'Paris'})" in done.stdout
    assert "tool result  18°C, light rain" in done.stdout
    assert "assistant  Here is the weather in Paris: 18°C" in done.stdout
    assert "[TOOL_CALL]" not in done.stdout
    assert "Unclosed" not in done.stderr, "every server shut down cleanly"


def _demo(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolrelay", "demo", *arguments],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_demo_takes_a_city_in_lower_case_and_names_it_once() -> None:
    done = _demo("--question", "weather in new york please")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "get_weather({'city': 'new york'})" in done.stdout
    # The question, the model's words before its call, the call and the answer.
    assert done.stdout.count("new york") == 4, done.stdout


def test_demo_shows_what_the_model_said_when_it_calls_no_tool() -> None:
    done = _demo("--question", "Say hello to me.")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "You said:" in done.stdout and "no tool call" in done.stdout


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_demo_speaks_the_other_apis(api: str) -> None:
    done = _demo("--api", api)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"({api})" in done.stdout
    # The client sees the answer; the weather service saw toolrelay's request.
    assert "get_weather, run by toolrelay: GET /weather/Paris" in done.stdout
    assert "Here is the weather in Paris: 18°C" in done.stdout
    assert "[TOOL_CALL]" not in done.stdout
