"""Real third-party MCP servers from npm, installed once into a cache folder.

``scripts/install`` installs them (when npm is there); a test that needs
them installs them itself when they are missing. Where npm cannot install
them the test is skipped, saying why, except under CI (``CI=true``), where
that is a failure: CI must run them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Pinned: what the tests were written against (scripts/install names the same).
PACKAGES = (
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
)
FOLDER = Path(os.environ.get("TOOLRELAY_MCP_NPM", ROOT / ".cache" / "mcp-npm"))


def npm_servers() -> Path:
    """The folder the servers are installed in (``npx --prefix FOLDER NAME`` runs one)."""
    if not _installed():
        reason = _install()
        if reason is not None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"the npm MCP servers are needed under CI: {reason}")
            pytest.skip(f"the npm MCP servers cannot be installed here: {reason}")
    return FOLDER


def npx(name: str, *args: str) -> dict[str, object]:
    """A stdio ``mcpServers`` entry that runs an installed server's command with npx."""
    return {"command": "npx", "args": ["--no-install", "--prefix", str(FOLDER), name, *args]}


def _installed() -> bool:
    return all((FOLDER / "node_modules" / p.rsplit("@", 1)[0]).is_dir() for p in PACKAGES)


def _install() -> str | None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("npx") is None:
        return "npm is not installed (apt-get install nodejs npm)"
    FOLDER.mkdir(parents=True, exist_ok=True)
    with (FOLDER / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (pytest-xdist, two runs)
        if _installed():
            return None
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(FOLDER), *PACKAGES],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode != 0:
        return f"npm install failed: {done.stderr.strip()[-500:]}"
    return None
