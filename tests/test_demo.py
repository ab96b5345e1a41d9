"""``toolrelay demo`` as the README runs it: a real process, stdin closed, no network."""

from __future__ import annotations

import subprocess
import sys


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
    assert "tool call" in done.stdout and "get_weather" in done.stdout
    assert "tool result" in done.stdout and "18°C" in done.stdout
    assert "assistant" in done.stdout
    assert "[TOOL_CALL]" not in done.stdout
    assert "Unclosed" not in done.stderr, "every server shut down cleanly"
