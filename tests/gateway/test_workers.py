"""``toolrelay serve --workers N``: several processes on one port, one set of counters."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx

from toolrelay.simulator import Simulator

REQUESTS = 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _counter(metrics: str, name: str) -> float:
    for row in metrics.splitlines():
        if row.startswith(name + " "):
            return float(row.split()[-1])
    return 0.0


def test_two_workers_answer_and_count_as_one() -> None:
    port = _free_port()
    with Simulator() as sim:
        args = [sys.executable, "-m", "toolrelay", "serve", "--backend", sim.openai_url]
        args += ["--backend-kind", "openai", "--port", str(port), "--workers", "2"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    httpx.get(url + "/health", timeout=2)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
            question = {"role": "user", "content": "What is the weather in Paris?"}
            body = {"model": "m", "messages": [question], "tools": [tool]}
            for _ in range(REQUESTS):
                reply = httpx.post(url + "/v1/chat/completions", json=body, timeout=20)
                assert reply.status_code == 200
            # Each a new connection: the workers take turns; every one counts all requests.
            seen: dict[int, int] = {}
            deadline = time.monotonic() + 30
            while len(seen) < 2 and time.monotonic() < deadline:
                health = httpx.get(url + "/health", timeout=10).json()
                seen[health["process"]] = health["counters"]["requests"].get("ok", 0)
                metrics = httpx.get(url + "/metrics", timeout=10).text
                assert _counter(metrics, 'toolrelay_requests_total{outcome="ok"}') == REQUESTS
                # The quality series too: each call checked once, whichever worker did it.
                valid = "toolrelay_quality_checked_total"
                valid += '{backend="default",model="m",outcome="valid"}'
                assert _counter(metrics, valid) == REQUESTS
            assert len(seen) == 2, "one worker answered every request"
            assert set(seen.values()) == {REQUESTS}
            assert os.getpid() not in seen
        finally:
            proc.terminate()
            proc.wait(30)
