"""Issue 23, item 5: the chat built-ins against what a work dir may hold — a FIFO,
a socket, a regular expression that backtracks forever, symlink loops."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.chat_scenario import ASK_NOTES, NOTES_TASK
from toolrelay.cli.chat.approval import AlwaysApprove
from toolrelay.cli.chat.files import MAX_MATCHES
from toolrelay.cli.chat.toolbox import ToolOptions, build_toolbox
from toolrelay.cli.chat.workspace import Workspace
from toolrelay.events import ToolCall
from toolrelay.io.tools import ToolOutput
from toolrelay.simulator import Simulator, SimulatorConfig


def timed_run(
    root: Path, name: str, timeout: float = 15.0, **arguments: Any
) -> tuple[ToolOutput, float]:
    """The call's output and how long the turn waited for it, in seconds."""
    options = ToolOptions(Workspace.at(root), AlwaysApprove(), max_chars=4000, http_timeout=timeout)
    toolbox, _ = build_toolbox(options)

    async def main() -> tuple[ToolOutput, float]:
        started = time.monotonic()
        # Bounded here too: a built-in that blocks must fail this test, not hang it.
        output = await asyncio.wait_for(toolbox.run(ToolCall("c1", name, arguments)), 60)
        return output, time.monotonic() - started

    return asyncio.run(main())


def run(root: Path, name: str, timeout: float = 15.0, **arguments: Any) -> ToolOutput:
    return timed_run(root, name, timeout, **arguments)[0]


def test_read_file_refuses_a_fifo_at_once(workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    started = time.monotonic()
    output = run(workdir, "read_file", path="pipe")
    assert output.is_error
    assert output.text == "Error: pipe is not a regular file (a FIFO): it is not read"
    assert time.monotonic() - started < 30


def test_read_file_refuses_a_socket_and_a_device(workdir: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(workdir / "sock"))
        output = run(workdir, "read_file", path="sock")
    assert output.is_error and "not a regular file (a socket)" in output.text
    unconfined = ToolOptions(Workspace.at(workdir, confined=False), AlwaysApprove())
    toolbox, _ = build_toolbox(unconfined)
    device = asyncio.run(toolbox.run(ToolCall("c1", "read_file", {"path": "/dev/zero"})))
    assert device.is_error and "not a regular file (a device)" in device.text


def test_a_one_shot_chat_ends_when_the_notes_are_a_fifo(workdir: Path) -> None:
    # The model reads notes.txt: a FIFO nobody writes to used to block the turn forever.
    (workdir / "notes.txt").unlink()
    os.mkfifo(workdir / "notes.txt")
    with Simulator(SimulatorConfig.load(NOTES_TASK)) as sim:
        args = ["chat", "--backend", sim.openai_url, "--workdir", str(workdir), "-m", ASK_NOTES]
        done = subprocess.run(
            [sys.executable, "-m", "toolrelay", *args], capture_output=True, text=True, timeout=90
        )
    assert done.returncode == 0, done.stderr
    assert "not a regular file (a FIFO)" in done.stdout


def test_search_skips_fifos_and_sockets(workdir: Path) -> None:
    os.mkfifo(workdir / "pipe.txt")
    (workdir / "real.txt").write_text("needle\n")
    output = run(workdir, "search_files", pattern="needle")
    assert output.text == "real.txt:1: needle"


def test_a_catastrophic_pattern_runs_in_linear_time(workdir: Path) -> None:
    # (a+)+$ over 40 a's and a '!' ran for minutes with Python's re; RE2 has no backtracking.
    (workdir / "trap.txt").write_text("a" * 40 + "!\n" + ("a" * 5000 + "!\n") * 200)
    started = time.monotonic()
    output = run(workdir, "search_files", pattern="(a+)+$", path="trap.txt")
    assert output.text == "no match"
    assert time.monotonic() - started < 30


def test_patterns_re2_cannot_run_are_a_clear_error(workdir: Path) -> None:
    output = run(workdir, "search_files", pattern=r"(a)\1")
    assert output.is_error and output.text.startswith("Error: bad pattern '(a)\\\\1'")


def test_a_symlink_loop_is_skipped_with_a_note(workdir: Path) -> None:
    (workdir / "loop").symlink_to(workdir / "loop")
    (workdir / "a").symlink_to(workdir / "b")
    (workdir / "b").symlink_to(workdir / "a")
    output = run(workdir, "search_files", pattern="milk")
    assert output.text == "notes.txt:1: buy milk\n[skipped 3 symlink loops: a, b, loop]"
    missing = run(workdir, "search_files", pattern="nothing here")
    assert missing.text == "no match\n[skipped 3 symlink loops: a, b, loop]"
    direct = run(workdir, "read_file", path="loop")
    assert direct.is_error and "symlink loop" in direct.text, direct.text


def test_results_stay_capped(workdir: Path) -> None:
    (workdir / "many.txt").write_text("hit\n" * (MAX_MATCHES * 3))
    output = run(workdir, "search_files", pattern="hit")
    assert output.text.count("many.txt:") == MAX_MATCHES
    assert f"[stopped at {MAX_MATCHES} matches]" in output.text


def test_every_builtin_runs_under_the_tool_timeout(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file system that stalls (a hung network mount, say): the turn goes on anyway.
    import toolrelay.cli.chat.files as files

    def stalled(*args: Any, **kwargs: Any) -> bytes:
        time.sleep(3)
        return b""

    monkeypatch.setattr(files, "_read_regular", stalled)
    output, waited = timed_run(workdir, "read_file", timeout=0.5, path="notes.txt")
    assert output.is_error and output.text == "Error: read_file did not finish within 0.5 s"
    assert waited < 2.5
