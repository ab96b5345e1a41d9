"""``toolrelay serve --workers 2`` against ``--workers 1``: throughput where the gateway is the
bottleneck, with the CPU time of every process, side by side in one run.

For the second worker to show, the gateway must be what limits throughput, so
everything around it is made as cheap as it can be:

* the backend is a raw asyncio protocol (no HTTP framework) that answers every
  chat request with one precomputed completion: a rescue-format (Hermes) text
  call whose argument is ``ARGUMENT_CHARS`` characters of code full of
  escapes, so that the gateway's work per request (reading the request,
  rendering the tools into the prompt, parsing and validating the call,
  writing the answer) dominates;
* the load comes from ``wrk`` (C, one thread, keep-alive connections), which
  needs ``apt-get install wrk``.

``--workers 1`` and ``--workers 2`` are alternated ``--rounds`` times. For each
measurement the CPU time each process used (from ``/proc``; ``wrk``'s from its
rusage) is reported in cores (CPU seconds per second), and so is the rest of
the machine's, so that a reader sees where the cores went.

    .venv/bin/python bench/workers_bench.py [--write]   # --write updates bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_bench import TOOLRELAY, free_port, process, write_section

ARGUMENT_CHARS = 4096
SNIPPET = 'def greet(name):\n    print(f"Hello, {name}!\\n")\n    return {"ok": True}\n\n'
CODE = (SNIPPET * (ARGUMENT_CHARS // len(SNIPPET) + 1))[:ARGUMENT_CHARS]
ARGUMENTS = {"path": "app.py", "content": CODE}
TEXT = "<tool_call>\n" + orjson.dumps({"name": "write_file", "arguments": ARGUMENTS}).decode()
TEXT += "\n</tool_call>"
TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "Write app.py"}],
    "tools": [TOOL],
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _http(body: bytes) -> bytes:
    head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    return (head + f"content-length: {len(body)}\r\n\r\n").encode() + body


COMPLETION = _http(
    orjson.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": TEXT},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 1200, "total_tokens": 1300},
        }
    )
)
MODELS = _http(orjson.dumps({"object": "list", "data": [{"id": "bench", "object": "model"}]}))


class Answer(asyncio.Protocol):
    """A keep-alive HTTP/1.1 server that answers every request at once, precomputed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            start = head.find(b"content-length:")
            length = 0
            if start >= 0:
                stop = head.find(b"\r\n", start)
                length = int(head[start + 15 : stop if stop >= 0 else None])
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            self.transport.write(MODELS if head.startswith(b"get") else COMPLETION)


def serve_backend(port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Answer, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def gateway_processes(pid: int) -> list[int]:
    """``serve`` and its workers (spawned children; multiprocessing's resource tracker,
    also a child, is left out)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                if b"multiprocessing.spawn" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
    return found


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def held_connections(pids: list[int], port: int) -> list[int]:
    """Established connections to ``port`` held by each process (/proc/net/tcp, /proc/PID/fd)."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "01" and int(local.rpartition(":")[2], 16) == port:
                    established.add(f"socket:[{inode}]")
    counts = []
    for pid in pids:
        held = 0
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    held += os.readlink(fd) in established
        counts.append(held)
    return counts


@dataclass
class Measurement:
    workers: int
    rate: float
    errors: int
    seconds: float
    gateway: list[float]  # cores used by each gateway process
    backend: float
    client: float
    machine: float
    # wrk's connections each gateway process held, halfway through the run.
    held: list[int] = field(default_factory=list)

    @property
    def others(self) -> float:
        return max(0.0, self.machine - sum(self.gateway) - self.backend - self.client)


def check_answer(url: str) -> None:
    """One request: the gateway must return the call, exactly, or the figures mean nothing."""
    answer = httpx.post(url + "/v1/chat/completions", json=BODY, timeout=30).json()
    call = answer["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "write_file", answer
    assert json.loads(call["arguments"]) == ARGUMENTS, "the call's arguments differ"


def prioritise(pids: list[int], niceness: int | None) -> None:
    """Give the benchmark's processes this niceness (negative: ahead of the machine's
    other work; needs root)."""
    if niceness is not None:
        for pid in pids:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)


def run_wrk(
    url: str, script: str, connections: int, seconds: float, niceness: int | None
) -> tuple[float, int, float]:
    """Requests/s, failed requests, and wrk's own CPU seconds."""
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", script, url]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: prioritise([0], niceness),
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed:\n{output}")
    rate = errors = 0
    for line in output.splitlines():
        if line.startswith("Requests/sec:"):
            rate = float(line.split()[1])
        if "Non-2xx or 3xx responses:" in line or line.strip().startswith("Socket errors:"):
            errors += sum(int(part) for part in line.replace(",", " ").split() if part.isdigit())
    return float(rate), errors, usage.ru_utime + usage.ru_stime


def measure(
    workers: int,
    backend: str,
    backend_pid: int,
    script: str,
    args: argparse.Namespace,
) -> Measurement:
    connections, seconds, niceness = args.connections, args.seconds, args.nice
    port = free_port()
    serve = [*TOOLRELAY, "serve", "--backend", backend, "--backend-kind", "openai"]
    serve += ["--tool-mode", "rescue"]
    serve += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    url = f"http://127.0.0.1:{port}"
    with process(serve, url + "/health") as pid:
        deadline = time.monotonic() + 30
        while len(gateway_processes(pid)) < (1 if workers == 1 else 1 + workers):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        check_answer(url)
        gateway = gateway_processes(pid)
        prioritise(gateway, niceness)
        run_wrk(url + "/v1/chat/completions", script, connections, 1.0, niceness)  # warm up
        before = [cpu_seconds(p) for p in gateway]
        backend_before, machine_before = cpu_seconds(backend_pid), machine_busy()
        workers_only = gateway[1:] if workers > 1 else gateway
        held: list[int] = []

        def count() -> None:
            held.extend(held_connections(workers_only, port))

        sample = threading.Timer(seconds / 2, count)
        sample.start()
        started = time.monotonic()
        rate, errors, client = run_wrk(
            url + "/v1/chat/completions", script, connections, seconds, niceness
        )
        sample.join()
        elapsed = time.monotonic() - started
        used = [cpu_seconds(p) - b for p, b in zip(gateway, before, strict=True)]
        backend_used = cpu_seconds(backend_pid) - backend_before
        machine_used = machine_busy() - machine_before
    return Measurement(
        workers,
        rate,
        errors,
        elapsed,
        # The serve process of --workers 2 only watches its workers: leave it out.
        [u / elapsed for u in (used[1:] if workers > 1 else used)],
        backend_used / elapsed,
        client / elapsed,
        machine_used / elapsed,
        held,
    )


def wrk_script(folder: Path) -> str:
    body = orjson.dumps(BODY).decode()
    assert "]==]" not in body
    lua = (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = [==[{body}]==]\n"
    )
    path = folder / "post.lua"
    path.write_text(lua)
    return str(path)


def cores(values: list[float]) -> str:
    return " + ".join(f"{v:.2f}" for v in values)


def report(results: list[Measurement], args: argparse.Namespace) -> str:
    by = {w: [m for m in results if m.workers == w] for w in (1, 2)}
    rate = {w: statistics.median(m.rate for m in by[w]) for w in (1, 2)}
    # Requests per CPU second of the gateway: what a core buys, whatever share it got.
    per_core = {w: statistics.median(m.rate / sum(m.gateway) for m in by[w]) for w in (1, 2)}
    gateway_cores = {w: statistics.median(sum(m.gateway) for m in by[w]) for w in (1, 2)}
    rows = [
        "| workers | requests/s | gateway processes (cores) | connections held "
        "| requests per gateway CPU second | backend | wrk | rest of machine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in results:
        rows.append(
            f"| {m.workers} | {m.rate:.0f} | {cores(m.gateway)} = {sum(m.gateway):.2f} "
            f"| {' + '.join(map(str, m.held))} | {m.rate / sum(m.gateway):.0f} "
            f"| {m.backend:.2f} | {m.client:.2f} | {m.others:.2f} |"
        )
    others = [m.others for m in results]
    # Runs where one worker took (nearly) all of wrk's keep-alive connections.
    lopsided = sum(1 for m in by[2] if min(m.gateway) < 0.05 * sum(m.gateway))
    load = os.getloadavg()[0]
    return "\n".join(
        [
            "## Gateway workers",
            "",
            "`bench/workers_bench.py`: `toolrelay serve --workers 1` and `--workers 2` "
            "(`--tool-mode rescue`), alternated "
            f"{args.rounds} times, each driven by `wrk` (one thread, {args.connections} "
            f"keep-alive connections, {args.seconds:g} s) with a request carrying one tool, "
            "in front of a raw asyncio backend that answers every request with one "
            f"precomputed completion: a Hermes text call whose argument is {ARGUMENT_CHARS} "
            "characters of code with escapes. The gateway renders the tool into the prompt, "
            "parses the call out of the text, validates it and answers it as `tool_calls` "
            "(checked exactly before each measurement). CPU is in cores (CPU seconds per "
            f"second of the run) from `/proc`; {os.cpu_count()} cores; load average "
            f"{load:.1f} at the end (other sessions share the machine: the last column).",
            "",
            *rows,
            "",
            f"- `--workers 1`: {rate[1]:.0f} requests/s (median), "
            f"`--workers 2`: {rate[2]:.0f} requests/s",
            f"- ratio: **{rate[2] / rate[1]:.2f}×**",
            f"- cores the gateway got (median): {gateway_cores[1]:.2f} with one worker, "
            f"{gateway_cores[2]:.2f} with two; the rest of the machine took "
            f"{min(others):.2f}–{max(others):.2f} cores",
            f"- requests per gateway CPU second (median): {per_core[1]:.0f} with one worker, "
            f"{per_core[2]:.0f} with two",
            "",
            "Throughput is the CPU the gateway gets times what a CPU second buys. The second "
            f"worker's cost per request shows in the last ratio ({per_core[2] / per_core[1]:.2f}× "
            "the requests per CPU second of one worker); its gain, in the cores it finds "
            f"({gateway_cores[2] / gateway_cores[1]:.2f}× those of one worker). On cores the "
            "rest of the machine keeps busy, a second process only gets a larger share of "
            "them; alone on two idle cores, the gateway's ceiling is the requests per CPU "
            "second times two.",
            *(
                [
                    "",
                    f"In {lopsided} of the {len(by[2])} runs with two workers, one worker "
                    "accepted all of wrk's keep-alive connections and the other stayed idle: "
                    "uvicorn's workers share one listening socket and whichever is awake when "
                    "the connections arrive takes them, which on a busy machine can be one. "
                    "Clients that open connections over time (most load balancers) spread "
                    "over both.",
                ]
                if lopsided
                else []
            ),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--nice",
        type=int,
        metavar="N",
        help="run the gateway, the backend and wrk at this niceness (e.g. -10, as root: ahead "
        "of the machine's other work, to see what the gateway does with the cores it gets)",
    )
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--serve-backend", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_backend:
        serve_backend(args.serve_backend)
        return
    if shutil.which("wrk") is None:
        sys.exit("workers_bench: wrk is needed (apt-get install wrk)")
    port = free_port()
    backend_args = [sys.executable, __file__, "--serve-backend", str(port)]
    results: list[Measurement] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        process(backend_args, f"http://127.0.0.1:{port}/v1/models") as backend_pid,
    ):
        script = wrk_script(Path(folder))
        prioritise([backend_pid], args.nice)
        backend = f"http://127.0.0.1:{port}/v1"
        for _ in range(args.rounds):
            for workers in (1, 2):
                m = measure(workers, backend, backend_pid, script, args)
                print(json.dumps(m.__dict__), flush=True)
                if m.errors:
                    raise RuntimeError(f"{m.errors} requests failed with {workers} worker(s)")
                results.append(m)
    text = report(results, args)
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
