"""``toolrelay chat`` in a pseudo-terminal, as a person uses it: a turn with
tool calls, line history, multi-line input, Ctrl-C during a turn (the turn
stops, the session goes on), Ctrl-D to leave."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli.chat_scenario import ASK_NOTES, NOTES_TASK
from tests.cli.processes import alive
from toolrelay.simulator import Simulator, SimulatorConfig

PROMPT = "you› "
UP = "\x1b[A"
_STYLE = r"(?:\x1b\[[0-9;]*m)*"


def shown(text: str) -> str:
    """A pattern for ``text`` as the terminal gets it: styles may change at spaces."""
    return re.escape(text).replace("\\ ", f"{_STYLE} {_STYLE}")


@pytest.fixture
def terminal(tmp_path: Path, workdir: Path) -> Iterator[Any]:
    """terminal(*args, **switches) -> (pexpect child at the first prompt, simulator)."""
    started: list[tuple[pexpect.spawn, Simulator]] = []

    def start(*args: str, **switches: Any) -> tuple[pexpect.spawn, Simulator]:
        sim = Simulator(SimulatorConfig.load(NOTES_TASK, **switches))
        sim.start()
        env = {**os.environ, "TOOLRELAY_HISTORY": str(tmp_path / "history"), "TERM": "xterm"}
        child = pexpect.spawn(
            sys.executable,
            ["-m", "toolrelay", "chat", "--backend", sim.openai_url, *args],
            cwd=workdir,
            env=env,
            encoding="utf-8",
            timeout=20,
            dimensions=(40, 120),
        )
        started.append((child, sim))
        child.expect_exact(PROMPT)
        return child, sim

    yield start
    for child, sim in started:
        child.close(force=True)
        sim.stop()


def user_messages(sim: Simulator) -> list[list[str]]:
    """The user messages of each completion request, in order."""
    return [
        [m["content"] for m in r.body["messages"] if m["role"] == "user"]
        for r in sim.requests
        if r.path.endswith("/chat/completions")
    ]


def test_a_turn_with_tool_calls_history_and_multi_line_input(terminal: Any, tmp_path: Path) -> None:
    child, sim = terminal()
    child.sendline(ASK_NOTES)
    child.expect(shown("⚙ list_directory"))
    child.expect(shown("⚙ read_file"))
    child.expect_exact("The notes say: buy milk")
    child.expect_exact("· native · 3 rounds")
    child.expect_exact(PROMPT)
    # The up arrow brings the message back; the conversation goes on.
    child.send(UP + "\r")
    child.expect(shown("⚙ list_directory"))
    child.expect_exact(PROMPT)
    assert user_messages(sim)[3] == [ASK_NOTES, ASK_NOTES]
    # A trailing backslash continues the message on the next line.
    child.sendline("first line \\")
    child.expect_exact("...  ")
    child.sendline("second line")
    child.expect_exact("You said: first line \r\nsecond line")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    history = (tmp_path / "history").read_text()
    assert ASK_NOTES in history and "second line" in history


def test_ctrl_c_cancels_the_turn_and_its_command_not_the_session(
    terminal: Any, workdir: Path
) -> None:
    child, sim = terminal("--yes")
    child.sendline("run echo $$ > pid; sleep 30")
    child.expect(shown("⚙ run_command"))
    pid_file = workdir / "pid"
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    child.sendintr()
    child.expect_exact("turn cancelled")
    child.expect_exact(PROMPT)
    assert not alive(int(pid_file.read_text()))
    child.sendline("hello")
    child.expect_exact("You said: hello")
    child.expect_exact(PROMPT)
    # The cancelled turn left nothing in the conversation.
    assert user_messages(sim)[-1] == ["hello"]
    # Ctrl-C at the prompt clears the line and stays.
    child.send("half a thought")
    child.expect_exact("half a thought")  # as a person would: typed, seen, then Ctrl-C
    child.sendintr()
    child.expect_exact(PROMPT)
    child.sendline("still here")
    child.expect_exact("You said: still here")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)


def test_ctrl_c_while_the_model_streams(terminal: Any) -> None:
    child, sim = terminal(chunk=2, delay_ms=100)
    # The first answer teaches whether the model's template opens reasoning (it is
    # held back until then: toolrelay.undecided); the second streams as it comes.
    child.sendline("hello")
    child.expect_exact("You said: hello")
    child.expect_exact(PROMPT)
    child.sendline("tell me a long story")
    child.expect_exact("You said: tell")
    child.sendintr()
    child.expect_exact("turn cancelled")
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    assert len(user_messages(sim)) == 2


def test_a_confirmation_asked_in_the_terminal(terminal: Any, workdir: Path) -> None:
    child, _ = terminal()
    child.sendline("write todo.txt buy bread")
    child.expect_exact("allow the agent to create todo.txt (9 bytes)? [y/N] ")
    child.sendline("n")
    child.expect_exact("the user did not allow writing todo.txt")
    child.expect_exact(PROMPT)
    assert not (workdir / "todo.txt").exists()
    # The y/n answer is not in the line history: the up arrow brings the message.
    child.send(UP + "\r")
    child.expect_exact("allow the agent to create todo.txt (9 bytes)? [y/N] ")
    child.sendline("y")
    child.expect_exact("wrote 9 bytes to todo.txt")
    child.expect_exact(PROMPT)
    assert (workdir / "todo.txt").read_text() == "buy bread"
