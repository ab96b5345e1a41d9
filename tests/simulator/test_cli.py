"""The real `toolrelay simulate` command, as a subprocess on a free port."""

from __future__ import annotations

import re
import select
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

SCENARIO = """\
models: [cli-model]
settings: {chunk: 3}
rules:
  - match: {tools: none}
    answer: {content: "no tools here"}
  - answer: {content: "tools seen"}
"""


def toolrelay_command() -> list[str]:
    script = Path(sys.executable).with_name("toolrelay")
    return [str(script)] if script.exists() else [sys.executable, "-m", "toolrelay"]


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    return path


def test_simulate_command_serves_and_announces_its_url(scenario_file: Path):
    command = [*toolrelay_command(), "simulate", "--port", "0", "--scenario", str(scenario_file)]
    process = subprocess.Popen(
        [*command, "--strip-tools", "--capabilities", "completion"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready, "no URL announced within 20 s"
        line = process.stdout.readline()
        found = re.fullmatch(r"toolrelay simulate listening on (http://127\.0\.0\.1:(\d+))\n", line)
        assert found, line
        assert int(found.group(2)) > 0
        with httpx.Client(base_url=found.group(1), timeout=10) as http:
            tool = {"type": "function", "function": {"name": "f"}}
            request = {
                "model": "cli-model",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [tool],
                "stream": True,
            }
            body = http.post("/v1/chat/completions", json=request).text
            pieces = re.findall(r'"content":"([^"]*)"', body)
            assert pieces == ["", "no ", "too", "ls ", "her", "e"]
            show = http.post("/api/show", json={"model": "cli-model"}).json()
            assert show["capabilities"] == ["completion"]
            assert [m["name"] for m in http.get("/api/tags").json()["models"]] == ["cli-model"]
    finally:
        process.terminate()
        process.wait(10)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()


def test_simulate_command_rejects_a_bad_scenario(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("rules: []\n")
    result = subprocess.run(
        [*toolrelay_command(), "simulate", "--scenario", str(path)],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 2
    assert "rules" in result.stderr
    assert result.stdout == ""
