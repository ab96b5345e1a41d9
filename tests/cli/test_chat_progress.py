"""``toolrelay chat`` on a slow server (issue 24): the answer's token budget, a
spinner that shows time and tokens while the model works, and Ctrl-C that
cancels the request to the backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli.chat_scenario import NOTES_TASK
from tests.gateway.support import silent_backend
from toolrelay.cli import main
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig

LONG = {"rules": [{"answer": {"content": "word " * 400}}]}


def _bodies(sim: Simulator) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.path.endswith("/chat/completions")]


def test_every_request_carries_a_token_budget(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    with Simulator(SimulatorConfig.load(NOTES_TASK)) as sim:
        chat = ["chat", "--backend", sim.openai_url, "--workdir", str(workdir)]
        assert main([*chat, "-m", "What do my notes say?"]) == 0
        assert len(_bodies(sim)) == 3
        assert {body["max_tokens"] for body in _bodies(sim)} == {2048}
        sim.requests.clear()
        assert main([*chat, "--max-tokens", "0", "-m", "hi"]) == 0
        assert all("max_tokens" not in body for body in _bodies(sim))
    capsys.readouterr()
    assert main(["chat", "--backend", "http://127.0.0.1:9/v1", "--max-tokens", "-1"]) == 2
    assert "--max-tokens must be 0 or more" in capsys.readouterr().err


def test_an_answer_cut_at_the_budget_says_so(
    capsys: pytest.CaptureFixture[str], workdir: Path
) -> None:
    with Simulator(SimulatorConfig.load(LONG)) as sim:
        status = main(["chat", "--backend", sim.openai_url, "--max-tokens", "10", "-m", "talk"])
    out, err = capsys.readouterr()
    assert status == 0
    assert out == "word " * 8 + "\n"  # 10 tokens of about four characters
    assert "the answer was cut short at --max-tokens 10" in err


def test_the_spinner_shows_time_and_tokens_while_the_answer_is_held(workdir: Path) -> None:
    with Simulator(SimulatorConfig.load(LONG, chunk=4, delay_ms=40)) as sim:
        # Played as llama.cpp, whose /props shows the template: the reasoning flag is known
        # from the first request, so no text is held while it is not (toolrelay.undecided).
        argv = ["chat", "--backend", sim.openai_url, "--backend-kind", "llamacpp", "-m", "talk"]
        child = pexpect.spawn(
            sys.executable,
            ["-m", "toolrelay", *argv],
            cwd=workdir,
            env={**os.environ, "TERM": "xterm"},
            encoding="utf-8",
            timeout=30,
            dimensions=(40, 120),
        )
        try:
            # Standard output waits for the whole answer; the trace shows it coming.
            child.expect(r"writing… \d+ s · ~\d+ tokens")
            first = int(child.match.group(0).split("~")[1].split()[0])
            child.expect(r"writing… \d+ s · ~(\d+) tokens")
            assert int(child.match.group(1)) >= first
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)


class _SlowModel:
    """A model server that starts streaming an answer and then thinks forever:
    ``asked`` is set when the request is in, ``closed`` when its client hangs up."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.closed = threading.Event()
        self._stream = silent_backend(self.closed)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.asked.set()
        await self._stream(scope, receive, send)


def test_ctrl_c_cancels_the_backend_request(workdir: Path) -> None:
    model = _SlowModel()
    with BackgroundServer(model) as backend:
        command = ["chat", "--backend", backend.url + "/v1", "--backend-kind", "openai"]
        process = subprocess.Popen(
            [sys.executable, "-m", "toolrelay", *command, "--model", "m", "-m", "hello"],
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert model.asked.wait(30), "the request never came"
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        assert model.closed.wait(10), "the backend's request was not cancelled"
        assert process.returncode == 130, err
        assert "toolrelay chat: cancelled" in err
