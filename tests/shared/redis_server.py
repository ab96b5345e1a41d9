"""A real ``redis-server`` on a free 127.0.0.1 port, in a temporary folder.

``scripts/install`` installs Debian's ``redis-server`` when it is missing and
it may (``apt-get`` as root or through ``sudo -n``); elsewhere the tests that
need it are skipped, saying so, and fail under CI, where it must be there.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

_START_TIMEOUT = 30.0
_PORT_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """Another process bound the port first."""


def redis_server_binary() -> str:
    """The path of ``redis-server``; skips the test (fails it under CI) without one."""
    found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")
    if found is None:
        reason = (
            "redis-server is not installed: scripts/install installs Debian's redis-server "
            "when it may (root or sudo -n, with apt-get); or: apt-get install redis-server"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A redis-server at ``url``, started and stopped at will (``start()``/``stop()``)."""

    def __init__(self, folder: Path) -> None:
        self.binary = redis_server_binary()
        self.folder = folder
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        # A restart must come back on the same port: the gateways know only that one.
        self.started_once = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._start()
                return
            except PortTaken:
                if self.started_once or attempt == _PORT_ATTEMPTS - 1:
                    raise
                # Taken between free_port() and redis-server's bind: another port.
                self.port = free_port()

    def _start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        # Nothing on disk: a restart starts empty, as a Redis without persistence does.
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        args += ["--logfile", str(self.folder / "redis.log")]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + _START_TIMEOUT
        with self.client() as client:
            while True:
                try:
                    client.ping()
                    self.started_once = True
                    return
                except redis.ConnectionError:
                    if self._process.poll() is not None or time.monotonic() > deadline:
                        log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                        self.stop()
                        if "Address already in use" in log:
                            raise PortTaken(log) from None
                        raise RuntimeError(f"redis-server did not start:\n{log}") from None
                    time.sleep(0.02)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
            self._process = None

    def pause(self) -> None:
        """Hang it (SIGSTOP): its connections stay open, nothing answers."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Kill it at once (SIGKILL): no shutdown, connections reset."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None
