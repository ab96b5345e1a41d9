"""``toolrelay simulate`` as real processes, the replicas of a model that a test
can slow down or kill outright (SIGKILL: no goodbye on its connections)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import openai


@dataclass
class SimulateProcess:
    url: str  # the OpenAI base URL, /v1
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


@contextmanager
def simulate_process(*switches: str) -> Iterator[SimulateProcess]:
    """``toolrelay simulate --port 0 SWITCHES``, stopped at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "toolrelay", "simulate", "--port", "0", *switches],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        found = re.search(r"http://\S+", line)
        assert found, f"the simulator did not say where it listens: {line!r}"
        yield SimulateProcess(found.group(0).rstrip("/") + "/v1", process)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@contextmanager
def simulate_processes(*switches: tuple[str, ...]) -> Iterator[list[SimulateProcess]]:
    with ExitStack() as stack:
        yield [stack.enter_context(simulate_process(*s)) for s in switches]


@dataclass
class Outcome:
    """One client request of a load: how it ended."""

    stream: bool
    ok: bool
    # Streamed requests: chunks the client had received when it ended.
    chunks: int = 0
    error: str = ""


def ask(client: openai.OpenAI, n: int, stream: bool) -> Outcome:
    """One request through the openai SDK, its failure caught and described."""
    messages = [{"role": "user", "content": f"hello number {n}, please say something long"}]
    if not stream:
        try:
            reply = client.chat.completions.create(model="toolrelay-sim", messages=messages)
        except openai.APIError as exc:
            return Outcome(False, False, error=repr(exc))
        return Outcome(False, bool(reply.choices[0].message.content))
    chunks = 0
    try:
        for _ in client.chat.completions.create(
            model="toolrelay-sim", messages=messages, stream=True
        ):
            chunks += 1
    except openai.APIError as exc:
        return Outcome(True, False, chunks, repr(exc))
    return Outcome(True, chunks > 0, chunks)
