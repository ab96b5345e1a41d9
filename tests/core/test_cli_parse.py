"""``toolrelay parse`` as users run it: a real process, files, stdin, JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolrelay", "parse", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_file_with_tools(tmp_path: Path) -> None:
    output = tmp_path / "out.txt"
    output.write_text('Sure.<tool_call>{"name": "create_issue", "arguments": {"t": 1}}</tool_call>')
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "gh__create_issue"}}]))
    done = run(str(output), "--tools", str(tools))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer == {
        "calls": [{"name": "gh__create_issue", "arguments": {"t": 1}}],
        "content": "Sure.",
        "reasoning": None,
    }


def test_stdin_and_pinned_format() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
        '[TOOL_CALL]{"name": "b", "arguments": {}}[/TOOL_CALL]'
    )
    answer = json.loads(run("--format", "bracket", stdin=text).stdout)
    assert [c["name"] for c in answer["calls"]] == ["b"]
    assert "<tool_call>" in answer["content"]


def test_jsonl_answers_every_line_in_order_and_survives_bad_ones() -> None:
    lines = [
        json.dumps({"text": '[TOOL_CALL]{"name": "x", "arguments": {"k": 2}}[/TOOL_CALL]'}),
        "this is not json",
        json.dumps({"text": 5}),
        json.dumps({"text": "hi", "format": "no-such-format"}),
        json.dumps({"text": "<think>hm</think>plain", "tools": None}),
    ]
    done = run("--jsonl", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == 5
    assert answers[0]["calls"] == [{"name": "x", "arguments": {"k": 2}}]
    assert "error" in answers[1] and "invalid JSON" in answers[1]["error"]
    assert answers[2] == {"error": '"text" must be a string'}
    assert "unknown format" in answers[3]["error"]
    assert answers[4] == {"calls": [], "content": "plain", "reasoning": "hm"}


def test_errors_are_readable() -> None:
    done = run("/no/such/file")
    assert done.returncode == 2
    assert done.stderr.startswith("toolrelay parse: ")
    assert "Traceback" not in done.stderr


def test_list_formats() -> None:
    lines = run("--list-formats").stdout.splitlines()
    names = [line.split()[0] for line in lines if not line.startswith(" ")]
    assert names[0] == "auto" and "hermes" in names and "bracket" in names
    assert len(names) == len(set(names))
    # Each format's families are on the line under it.
    assert any("Kimi K2" in line for line in lines if line.startswith(" "))
