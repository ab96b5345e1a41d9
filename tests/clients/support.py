"""Running a real client against ``toolrelay simulate`` through the gateway.

Every piece is a real process on 127.0.0.1: the simulator (``toolrelay
simulate``, a test double for a model), the gateway (``toolrelay serve``, or
the one ``toolrelay launch`` starts) and the client, installed by
``install.py``. The scenario makes the model call the client's own file or
shell tool on a file the test wrote; the client has to run the tool for real
and the model's final answer repeats what the tool returned, so the marker
only reaches the client's output through a real execution.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.install import PINNED, install

MODES = ("native", "rescue")
# Long: a client's first start (several hundred MB of binary) on a shared machine.
CLIENT_TIMEOUT = 300.0
_START_TIMEOUT = 30.0
ASK = "Read the file {path} and tell me what it says."
_ASKED = r"Read the file (?P<path>\S+?)\.? and tell me"


_outcomes: dict[str, str | None] = {}


def installed(name: str) -> Path:
    """The bin folder of the pinned client ``name``: skipped (failed under CI) without it.

    The first call installs every pinned client at once, side by side: one wait
    for all of them instead of one per client."""
    if not _outcomes:
        _outcomes.update(install(PINNED))
    reason = _outcomes[name]
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return PINNED[name].bin_dir


def unavailable() -> dict[str, str]:
    """The clients that could not be installed in this run, and why."""
    return {name: reason for name, reason in _outcomes.items() if reason is not None}


@dataclass(frozen=True)
class Task:
    """A file with a marker only reading it can reveal, and the question asking for it."""

    path: Path
    marker: str

    @property
    def question(self) -> str:
        return ASK.format(path=self.path)


def make_task(folder: Path) -> Task:
    """In the client's working folder (``folder/work``): clients read there unasked."""
    marker = f"MARKER-{secrets.token_hex(8)}"
    (folder / "work").mkdir(exist_ok=True)
    path = folder / "work" / "secret.txt"
    path.write_text(f"{marker}\n")
    return Task(path, marker)


def scenario(
    tool: str,
    arguments: dict[str, Any],
    *,
    final: tuple[str, dict[str, Any]] | None = None,
    result: dict[str, Any] | None = None,
    text_calls: bool = False,
    model: str = "sim-coder",
) -> dict[str, Any]:
    """The model: asked to read the file, it calls ``tool`` natively (native path)
    or as a ``<tool_call>`` text call (rescue path: tools in the prompt); given the
    result, it answers with it. ``{path}`` in ``arguments`` is the asked file.

    ``final``: a tool the model calls with the result instead of answering in
    text (smolagents' ``final_answer``, mini-swe-agent's submit command), the
    same way as the first call. ``result``: what says the tool result is back
    (default: ``tool_result: true``). ``text_calls``: the model writes its call
    as text even when the tools came natively (a server without a tool parser).
    ``model``: the one model the simulator lists (``launch`` picks it)."""
    result = result or {"tool_result": True}
    if final is None:
        last = [{"match": result, "answer": {"content": "The file says: {last_tool_result}"}}]
    else:
        last = _calls({**result}, *final, text_calls=text_calls)
    return {
        "models": [model],
        "rules": [
            *last,
            *_calls({"last_user": _ASKED}, tool, arguments, text_calls=text_calls),
            {"answer": {"content": "Ask me to read a file."}},
        ],
    }


def _calls(
    match: dict[str, Any], tool: str, arguments: dict[str, Any], *, text_calls: bool
) -> list[dict[str, Any]]:
    """A native call when tools came natively (unless ``text_calls``), a text call
    when they came in the prompt."""
    text_call = json.dumps({"name": tool, "arguments": arguments})
    written = {"content": f"<tool_call>\n{text_call}\n</tool_call>"}
    native = {"tool_calls": [{"name": tool, "arguments": arguments}]}
    return [
        {"match": {**match, "tools": "native"}, "answer": written if text_calls else native},
        {"match": {**match, "tools": "prompt"}, "answer": written},
    ]


def environment(home: Path, *bin_dirs: Path) -> dict[str, str]:
    """A client's environment: a home of its own (nothing of this machine's
    configuration, nothing written outside the test) and its bin folder first."""
    home.mkdir(parents=True, exist_ok=True)
    keep = {"PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "CI", "USER", "LOGNAME", "SHELL"}
    env = {name: value for name, value in os.environ.items() if name in keep}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        NO_COLOR="1",
        PATH=os.pathsep.join([*map(str, bin_dirs), os.environ.get("PATH", "")]),
    )
    return env


@contextmanager
def simulator(folder: Path, rules: dict[str, Any], *switches: str) -> Iterator[str]:
    """``toolrelay simulate`` with these rules and switches; its base URL."""
    scenario_file = folder / "scenario.json"
    scenario_file.write_text(json.dumps(rules))
    with _server(
        [
            sys.executable,
            "-m",
            "toolrelay",
            "simulate",
            "--port",
            "0",
            "--scenario",
            str(scenario_file),
            *switches,
        ],
        folder / "simulator.log",
    ) as process:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        found = re.search(r"http://\S+", line)
        assert found, f"the simulator did not say where it listens: {line!r}"
        yield found.group(0)


@contextmanager
def gateway(folder: Path, model_server: str, mode: str) -> Iterator[str]:
    """``toolrelay serve`` in front of the simulator at ``model_server`` (its OpenAI
    API, ``/v1``) in this tool mode; the gateway's base URL."""
    port = _free_port()
    backend = model_server + "/v1"
    command = [
        sys.executable, "-m", "toolrelay", "serve", "--backend", backend, "--tool-mode", mode,
        "--port", str(port), "--log-level", "debug",
    ]  # fmt: skip
    with _server(command, folder / "gateway.log", stdout_to_log=True):
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                httpx.get(url + "/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the gateway did not start: {_tail(folder / 'gateway.log')}")
                time.sleep(0.1)
        yield url


@contextmanager
def _server(
    command: list[str], log: Path, *, stdout_to_log: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink if stdout_to_log else subprocess.PIPE,
            stderr=sink,
            stdin=subprocess.DEVNULL,
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def launch(
    client: str,
    backend: str,
    mode: str,
    client_args: list[str],
    *,
    folder: Path,
    bin_dir: Path,
) -> subprocess.CompletedProcess[str]:
    """``toolrelay launch CLIENT`` in non-interactive mode; what it printed."""
    work = folder / "work"
    work.mkdir(exist_ok=True)
    command = [
        sys.executable, "-m", "toolrelay", "launch", client, "--backend", backend,
        "--tool-mode", mode, "--log-file", str(folder / "gateway.log"), "--log-level", "debug",
        "--", *client_args,
    ]  # fmt: skip
    return run(command, folder, bin_dir, cwd=work)


def run(
    command: list[str], folder: Path, *bin_dirs: Path, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command,
            cwd=cwd or folder,
            env={**environment(folder / "home", *bin_dirs), **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLIENT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{command[0:5]} did not finish in {CLIENT_TIMEOUT:.0f} s; output: "
            f"{exc.stdout!r} {exc.stderr!r}; gateway log: {_tail(folder / 'gateway.log')}"
        )


def assert_read(result: subprocess.CompletedProcess[str], task: Task, folder: Path) -> None:
    """The client ran its tool on the file and printed what it found."""
    assert result.returncode == 0 and task.marker in result.stdout, (
        f"status {result.returncode}\nstdout: {result.stdout[-2000:]}\n"
        f"stderr: {result.stderr[-3000:]}\ngateway log: {_tail(folder / 'gateway.log')}"
    )


def _tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except FileNotFoundError:
        return "(none)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
