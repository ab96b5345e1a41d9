"""``toolrelay launch claude`` as a user runs it: in a terminal (a pty), interactive.

The launcher hands the terminal to Claude Code 2.1: its first-run screens are
skipped by what launch wrote, the folder trust question is the user's to
answer, a typed request makes the model call ``Read``, Claude Code runs it
and shows the file's marker, ``/exit`` ends it, and the launcher exits with
its status.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.clients.support import environment, installed, make_task, scenario, simulator

pytestmark = pytest.mark.timeout(1200)

_WAIT = 120


def test_claude_in_a_terminal_through_launch(tmp_path: Path) -> None:
    bin_dir = installed("claude-2.1")
    task = make_task(tmp_path)
    with simulator(tmp_path, scenario("Read", {"file_path": "{path}"})) as model_server:
        env = {**environment(tmp_path / "home", bin_dir), "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        screen = (tmp_path / "screen.log").open("w")
        child = pexpect.spawn(
            sys.executable,
            ["-m", "toolrelay", "launch", "claude", "--backend", model_server + "/v1"],
            env=env,
            cwd=str(tmp_path / "work"),
            encoding="utf-8",
            timeout=_WAIT,
            dimensions=(40, 120),
        )
        child.logfile_read = screen
        try:
            # Words on this screen are placed by cursor moves: one word at a time.
            child.expect("trust")
            time.sleep(1.5)  # the selection list takes keys once drawn
            child.send("\x1bOB")  # down: "Yes, I trust this folder"
            time.sleep(1.0)
            child.send("\r")
            child.expect("sim-coder")  # the welcome banner names the model
            time.sleep(2)
            child.send(task.question)
            time.sleep(1)
            child.send("\r")
            child.expect(task.marker)
            time.sleep(1)
            child.send("/exit")
            time.sleep(1)
            child.send("\r")
            child.expect(pexpect.EOF)
        except (pexpect.TIMEOUT, pexpect.EOF) as exc:
            child.close(force=True)
            screen.close()
            pytest.fail(
                f"{type(exc).__name__}; the screen ended with: "
                f"{(tmp_path / 'screen.log').read_text(errors='replace')[-3000:]!r}"
            )
        child.close()
        screen.close()
    assert child.exitstatus == 0
