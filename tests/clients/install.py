"""The real agent clients, pinned, installed once into a cache folder outside the clone.

npm packages go into a ``--prefix`` folder each, PyPI packages into a virtual
environment each, so that nothing touches the project's ``.venv`` or the
machine's global packages. The cache is ``$TOOLRELAY_CLIENTS_CACHE``, else
``~/.cache/toolrelay-clients``; a folder counts as installed once its
``.installed`` file names the pinned spec, so a rerun costs nothing and a
half-finished install is redone. Installs run side by side, each under a lock
of its own (two test runs may share the cache).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_INSTALL_TIMEOUT = 900.0


@dataclass(frozen=True)
class Pinned:
    kind: Literal["npm", "pypi"]
    spec: str
    program: str  # the command it installs

    @property
    def folder(self) -> Path:
        slug = self.spec.replace("/", "+").replace("[", "(").replace("]", ")")
        return cache_folder() / self.kind / slug

    @property
    def bin_dir(self) -> Path:
        return self.folder / ("node_modules/.bin" if self.kind == "npm" else "bin")

    @property
    def command(self) -> Path:
        return self.bin_dir / self.program


# docs/clients.md lists these versions; change both together.
PINNED: dict[str, Pinned] = {
    "claude-2.1": Pinned("npm", "@anthropic-ai/claude-code@2.1.332", "claude"),
    "claude-2.0": Pinned("npm", "@anthropic-ai/claude-code@2.0.77", "claude"),
    "codex": Pinned("npm", "@openai/codex@0.171.0", "codex"),
    "opencode": Pinned("npm", "opencode-ai@1.18.33", "opencode"),
    "llm": Pinned("pypi", "llm==0.36", "llm"),
    "smolagents": Pinned("pypi", "smolagents[openai]==1.26.0", "python"),
    "mini-swe-agent": Pinned("pypi", "mini-swe-agent==2.4.6", "mini"),
}


def cache_folder() -> Path:
    configured = os.environ.get("TOOLRELAY_CLIENTS_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "toolrelay-clients"


def install(names: Iterable[str]) -> dict[str, str | None]:
    """Install the pinned clients ``names``; for each, None or why it could not be."""
    outcome: dict[str, str | None] = {}
    running: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    for name in names:
        pinned = PINNED[name]
        if _installed(pinned):
            outcome[name] = None
            continue
        missing = _missing_tool(pinned)
        if missing:
            outcome[name] = missing
            continue
        pinned.folder.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{pinned.folder}.lock", os.O_CREAT | os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run installing it: wait for it
        if _installed(pinned):
            os.close(lock)
            outcome[name] = None
            continue
        shutil.rmtree(pinned.folder, ignore_errors=True)  # a half-finished one
        pinned.folder.mkdir(parents=True)
        log = open(f"{pinned.folder}.log", "wb")  # noqa: SIM115 - closed by the child's end
        running[name] = (
            subprocess.Popen(["bash", "-c", _script(pinned)], stdout=log, stderr=subprocess.STDOUT),
            lock,
        )
        log.close()
    deadline = time.monotonic() + _INSTALL_TIMEOUT
    for name, (process, lock) in running.items():
        pinned = PINNED[name]
        try:
            status = process.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            status = -1
        if status == 0 and pinned.command.exists():
            (pinned.folder / ".installed").write_text(pinned.spec + "\n")
            outcome[name] = None
        else:
            tail = Path(f"{pinned.folder}.log").read_text(errors="replace").strip()[-600:]
            outcome[name] = f"installing {pinned.spec} failed (status {status}): {tail}"
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    return outcome


def _installed(pinned: Pinned) -> bool:
    marker = pinned.folder / ".installed"
    return marker.exists() and marker.read_text().strip() == pinned.spec


def _missing_tool(pinned: Pinned) -> str | None:
    if pinned.kind == "npm" and shutil.which("npm") is None:
        return f"npm is not installed, so {pinned.spec} cannot be (apt-get install npm)"
    return None


def _script(pinned: Pinned) -> str:
    folder = str(pinned.folder)
    if pinned.kind == "npm":
        return (
            f"npm install --no-audit --no-fund --no-save --loglevel=error "
            f"--prefix '{folder}' '{pinned.spec}'"
        )
    return (
        f"'{sys.executable}' -m venv '{folder}' && "
        f"'{folder}/bin/python' -m pip install --quiet --disable-pip-version-check "
        f"'{pinned.spec}'"
    )
