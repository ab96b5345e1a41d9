"""Every code block in README.md and docs/ runs as written (see ``blocks``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from blocks import (
    DATA_LANGUAGES,
    DOCUMENTS,
    ROOT,
    RUN_LANGUAGES,
    SHOWN_LANGUAGES,
    WELL_KNOWN_PORTS,
    Block,
    all_blocks,
    read_blocks,
)

_SERVER_LINE = re.compile(r"^(?:\S+/)?(?:toolrelay|python3? -m toolrelay)\s+(?:serve|simulate)\b")
_PORT_FLAG = re.compile(r"--port[ =](\d+)")
_COMMAND_TIMEOUT = 90
_LISTEN_TIMEOUT = 90.0


def test_every_block_is_run_or_says_why_not() -> None:
    unknown = [
        f"{block.label}: ```{block.language}"
        for block in all_blocks()
        if block.not_run is None
        and not block.ci_only
        and block.file is None
        and block.language not in RUN_LANGUAGES | DATA_LANGUAGES | SHOWN_LANGUAGES
    ]
    assert not unknown, "blocks in a language the docs test cannot run: " + ", ".join(unknown)
    no_reason = [block.label for block in all_blocks() if block.not_run == ""]
    assert not no_reason, "'not run' needs a reason: " + ", ".join(no_reason)


def test_ci_runs_the_readme_set_up_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    set_up = [block for block in read_blocks(ROOT / "README.md") if block.ci_only]
    assert len(set_up) == 2, "the README gives exactly two set-up commands"
    for block in set_up:
        for line in _commands(block.code):
            assert line in ci, f".ci/run does not run the README's {line!r}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_document_runs_as_written(document: Path, tmp_path: Path) -> None:
    session = _Session(tmp_path)
    try:
        for block in read_blocks(document):
            session.run(block)
    finally:
        session.close()


class _Session:
    """One reader going through one document top to bottom: a working folder,
    ports of their own, and the servers the document started."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ports = {port: _free_port() for port in WELL_KNOWN_PORTS}
        for example in ROOT.glob("*.example.*"):
            shutil.copy(example, folder)
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            **os.environ,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "TOOLRELAY_PORT": str(self.ports[8787]),
            "PYTHONUNBUFFERED": "1",
        }
        for name in list(self.env):
            if name.startswith(("TOOLRELAY_", "LLM_TOOL")) and name != "TOOLRELAY_PORT":
                del self.env[name]
        self.servers: list[tuple[str, subprocess.Popen[bytes]]] = []

    def run(self, block: Block) -> None:
        code = self._localise(block.code)
        if block.file is not None:
            (self.folder / block.file).write_text(code, encoding="utf-8")
            return
        if block.not_run is not None or block.ci_only or block.language in SHOWN_LANGUAGES:
            return
        if block.language == "json":
            json.loads(code)
            return
        if block.language == "yaml":
            yaml.safe_load(code)
            return
        if block.language == "python":
            output = self._foreground(block, [sys.executable, "-c", code])
        else:
            output = "".join(self._shell(block, line) for line in _commands(code))
        for expected in block.expect:
            assert self._localise(expected) in output, (
                f"{block.label}: the output lacks {expected!r}:\n{output}"
            )

    def _localise(self, text: str) -> str:
        for port, free in self.ports.items():
            text = re.sub(rf"(?<=[:= ]){port}\b", str(free), text)
        return text

    def _shell(self, block: Block, line: str) -> str:
        background = line.rstrip().endswith("&")
        command = line.rstrip().rstrip("&").rstrip()
        if background or _SERVER_LINE.match(command):
            self._start_server(block, command)
            return ""
        return self._foreground(block, ["bash", "-c", command])

    def _foreground(self, block: Block, argv: list[str]) -> str:
        done = subprocess.run(
            argv,
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=_COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (
            f"{block.label}: {argv[-1][:200]!r} exited {done.returncode}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
        return done.stdout + done.stderr

    def _start_server(self, block: Block, command: str) -> None:
        log = self.folder / f"server-{len(self.servers)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                ["bash", "-c", "exec " + command],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.servers.append((command, process))
        flag = _PORT_FLAG.search(command)
        port = int(flag.group(1)) if flag else self.ports[8787]
        # Generous: a loaded machine (CI, or several suites at once) starts servers slowly.
        deadline = time.monotonic() + _LISTEN_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                output = log.read_text(errors="replace")
                pytest.fail(f"{block.label}: {command!r} exited {process.returncode}\n{output}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        pytest.fail(
            f"{block.label}: {command!r} did not listen on port {port} within {_LISTEN_TIMEOUT:g} s"
        )

    def close(self) -> None:
        for _, process in reversed(self.servers):
            process.terminate()
        for _, process in self.servers:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _commands(code: str) -> list[str]:
    """Shell lines, continuation lines joined; blank and comment-only lines dropped."""
    commands: list[str] = []
    pending = ""
    for raw in code.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_gateway_setting_is_documented() -> None:
    from toolrelay.io.settings import Settings

    documented = set(re.findall(r"`(TOOLRELAY_[A-Z_]+)`", (ROOT / "docs/gateway.md").read_text()))
    settings = {f"TOOLRELAY_{name.upper()}" for name in Settings.model_fields} - {
        "TOOLRELAY_BACKENDS",
        "TOOLRELAY_MODELS",
    }
    assert not settings - documented, "settings missing from docs/gateway.md"
    assert not documented - settings, "docs/gateway.md names settings that do not exist"
