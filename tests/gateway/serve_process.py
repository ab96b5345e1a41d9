"""``toolrelay serve`` as a real process on a port the system picks (``--port 0``).

The port is read from uvicorn's "Uvicorn running on" line: nothing picks a
port, frees it and hopes it is still free when the server binds it. Standard
error is drained in a thread (a full pipe would stall the server) and kept.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_RUNNING = re.compile(r"Uvicorn running on (http://\S+)")
_START_TIMEOUT = 90.0


@dataclass
class ServeProcess:
    url: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def serve_process(*args: str, env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    """``toolrelay serve ARGS --port 0`` (at log level info or debug, which print the URL)."""
    command = [sys.executable, "-m", "toolrelay", "serve", *args, "--port", "0"]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    lines: list[str] = []
    found: list[str] = []
    started = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            match = _RUNNING.search(line)
            if match and not found:
                found.append(match.group(1))
                started.set()
        started.set()  # the process ended: no URL is coming

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not started.wait(_START_TIMEOUT) or not found:
            raise RuntimeError("toolrelay serve did not start:\n" + "\n".join(lines))
        yield ServeProcess(found[0], process, lines)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        reader.join(10)
