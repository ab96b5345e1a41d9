"""This commit against the previous release and the floor, in one run.

The gateway's own cost is easy to raise without noticing (issue 29: a wave of
features made every request 1.07–1.39× dearer and no one saw it). This bench
starts one ``toolrelay simulate`` and, in front of it, three gateways as
subprocesses on free 127.0.0.1 ports:

* this commit (``toolrelay serve`` from this checkout's environment);
* the previous release: the last tag (``--release REF``, default the newest
  tag), exported with ``git archive`` and installed into its own venv under
  ``/tmp`` (made on first use, kept for the next run), or ``--release-python``;
* the floor (``bench/floor_proxy.py``): the same server stack relaying bytes;
* with ``--granian``, this commit's app on granian (Rust, ASGI) instead of
  uvicorn, one worker, for the choice of server stack (``pip install granian``).

Each cell (non-streamed and streamed, without and with tools, concurrency 1
and 16; with ``--wide`` also concurrency 64, and the Anthropic Messages and
OpenAI Responses fronts, each cell of them too, which the floor, and a release
without such a front, are asked as Chat Completions) is run in rounds, the
three targets in turn within each round, so that a busy neighbour on the
shared machine weighs on all three alike. Per target: the CPU time of its
processes per request (their threads' run time from /proc/PID/task/*/schedstat,
children included; the median over the rounds), the latency p50, and its
memory at the end. Ratios first: they are what a
loaded machine still measures well.

    .venv/bin/python bench/release_bench.py [--rounds 5] [--wide] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import httpx
from gateway_bench import (
    PLAIN,
    ROOT,
    STREAM,
    TOOL,
    Refused,
    Request,
    aiohttp_post,
    cpu_seconds,
    failed_request,
    free_port,
    latencies,
    log_dir,
    percentile,
    process,
)
from results import write_section

HEADING = "## This commit, the previous release and the floor"
SCENARIO = {
    "models": ["bench"],
    "rules": [
        {
            "match": {"last_user": "stream", "tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"match": {"last_user": "stream"}, "answer": {"content": "abcd" * 128}},
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"answer": {"content": "Hello, this is a short answer."}},
    ],
}
WITH_TOOLS = {**PLAIN, "tools": [TOOL]}
STREAM_TOOLS = {**STREAM, "tools": [TOOL]}
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"


def messages_body(
    text: str, stream: bool = False, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The question as Anthropic Messages asks it; ``tools`` in Chat Completions' shape."""
    body: dict[str, Any] = {"model": "bench", "max_tokens": 1024}
    body["messages"] = [{"role": "user", "content": text}]
    if tools:
        body["tools"] = [
            {"name": tool["function"]["name"], "input_schema": tool["function"]["parameters"]}
            for tool in tools
        ]
    return {**body, "stream": True} if stream else body


def responses_body(
    text: str, stream: bool = False, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The question as OpenAI Responses asks it; ``tools`` in Chat Completions' shape."""
    body: dict[str, Any] = {"model": "bench", "input": text}
    if tools:
        body["tools"] = [{"type": "function", **tool["function"]} for tool in tools]
    return {**body, "stream": True} if stream else body


# Per front other than Chat Completions: its path and the body of a question.
FRONTS = {"messages": (MESSAGES, messages_body), "responses": (RESPONSES, responses_body)}


class Target(NamedTuple):
    """A gateway under measure: its base URL, its process and the log of its output."""

    base: str
    pid: int
    log: Path


# A cell: label, front ("chat"; "messages" or "responses", answered by the floor as chat),
# the Chat Completions body, concurrency, requests per round.
Cell = tuple[str, str, dict[str, Any], int, int]
CELLS: list[Cell] = [
    ("plain c=1", "chat", PLAIN, 1, 120),
    ("plain c=16", "chat", PLAIN, 16, 320),
    ("tools c=1", "chat", WITH_TOOLS, 1, 120),
    ("tools c=16", "chat", WITH_TOOLS, 16, 320),
    ("stream 128 chunks c=1", "chat", STREAM, 1, 32),
    ("stream 128 chunks c=16", "chat", STREAM, 16, 96),
    ("stream tools c=1", "chat", STREAM_TOOLS, 1, 80),
    ("stream tools c=16", "chat", STREAM_TOOLS, 16, 192),
]
# --wide: concurrency 64 on every Chat Completions cell, the Messages and the Responses fronts.
WIDE: list[Cell] = [
    ("plain c=64", "chat", PLAIN, 64, 640),
    ("tools c=64", "chat", WITH_TOOLS, 64, 640),
    ("stream 128 chunks c=64", "chat", STREAM, 64, 192),
    ("stream tools c=64", "chat", STREAM_TOOLS, 64, 384),
    *(
        (f"{front} {label} c={concurrency}", front, body, concurrency, total)
        for front in ("messages", "responses")
        for label, body, counts in (
            ("plain", PLAIN, ((1, 120), (16, 320), (64, 640))),
            ("tools", WITH_TOOLS, ((1, 120), (16, 320), (64, 640))),
            ("stream 128 chunks", STREAM, ((1, 32), (16, 96), (64, 192))),
            ("stream tools", STREAM_TOOLS, ((1, 80), (16, 192), (64, 384))),
        )
        for concurrency, total in counts
    ),
]


def speaks(base: str, front: str) -> bool:
    """Whether a gateway has ``front`` (an early release has neither Messages nor Responses)."""
    path, question = FRONTS[front]
    probe = httpx.post(base.removesuffix("/v1") + path, json=question("hi"), timeout=60)
    return probe.status_code != 404


def target_request(
    front: str, name: str, body: dict[str, Any], speaking: dict[str, set[str]]
) -> tuple[str, dict[str, Any]]:
    """The path and body a cell sends to one target: a Messages or Responses cell
    asks a target without that front (the floor) the same question as Chat
    Completions, as field_bench.py's translation lane does."""
    if front in FRONTS and name in speaking[front]:
        path, question = FRONTS[front]
        text = body["messages"][-1]["content"]
        return path, question(text, bool(body.get("stream")), body.get("tools"))
    return CHAT, body


def release_python(ref: str) -> Path:
    """The Python of a venv holding toolrelay as of ``ref``, made under /tmp on first use."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    home = Path(tempfile.gettempdir()) / f"toolrelay-release-{commit}"
    python = home / ".venv" / "bin" / "python"
    if python.exists():
        return python
    home.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(home)], input=archive.stdout, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(home / ".venv")], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(home)], check=True)
    return python


def last_tag() -> str:
    found = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0"], cwd=ROOT, capture_output=True, text=True
    )
    if found.returncode != 0:
        # A clone without tags (a shallow or a worktree's): say what to pass, no traceback.
        sys.exit("release_bench: no git tag names the previous release here: pass --release REF")
    return found.stdout.strip()


def family(pid: int) -> list[int]:
    """A process and its children (granian serves from a worker process it spawns)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def family_cpu(pid: int) -> float:
    return sum(thread_cpu_seconds(member) for member in family(pid))


def thread_cpu_seconds(pid: int) -> float:
    """The CPU time of a process's threads to the nanosecond, from each one's
    ``schedstat``: ``stat``'s user + system count 10 ms ticks, ±10% of a round of
    100 requests at 1 ms each. Without schedstat (an older kernel), those ticks."""
    tasks = Path(f"/proc/{pid}/task")
    if not (tasks / str(pid) / "schedstat").exists():
        return cpu_seconds(pid)
    total = 0
    for task in tasks.iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def rss_mib(pid: int) -> float:
    total = 0.0
    for member in family(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


_STREAM_ENDS = (b"data: [DONE]", b"event: message_stop", b"event: response.completed")


def stream_request(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}

    async def go() -> None:
        last = b""
        async with session.post(url, data=data, headers=headers) as response:
            if response.status != 200:
                raise Refused(url, response.status, await response.read())
            async for line in response.content:
                # Chat Completions' last line, or Messages' or Responses' last event.
                if line.startswith(_STREAM_ENDS):
                    return
                last = line.strip() or last
        # An in-stream error event is the usual last line: it says what broke.
        raise AssertionError(f"the stream from {url} ended without [DONE]; last line: {last!r}")

    return go


async def run_cells(
    targets: dict[str, Target],
    rounds: int,
    cells: list[Cell],
    speaking: dict[str, set[str]],
) -> dict[str, Any]:
    """Per cell and target: CPU µs per request (median of rounds) and p50 latency (ms)."""
    results: dict[str, Any] = {}
    # A target idles while the others run: its pooled connections are let go before
    # uvicorn's keep-alive timeout (5 s) closes them under a request being written.
    connector = aiohttp.TCPConnector(limit=64, keepalive_timeout=2)
    async with aiohttp.ClientSession(connector=connector) as session:
        for label, front, chat_body, concurrency, total in cells:
            make = stream_request if chat_body.get("stream") else aiohttp_post
            requests = {}
            for name, target in targets.items():
                path, body = target_request(front, name, chat_body, speaking)
                requests[name] = make(session, target.base.removesuffix("/v1") + path, body)
                await answered(target, name, requests[name], min(total, 32), concurrency)
            cpu: dict[str, list[float]] = {name: [] for name in targets}
            p50: dict[str, list[float]] = {name: [] for name in targets}
            names = list(targets)
            for turn in range(rounds):
                # A different first target each round: none always runs on a cold cache.
                for name in names[turn % len(names) :] + names[: turn % len(names)]:
                    pid = targets[name].pid
                    before = family_cpu(pid)
                    times = await answered(targets[name], name, requests[name], total, concurrency)
                    cpu[name].append((family_cpu(pid) - before) / total * 1e6)
                    p50[name].append(percentile(times, 0.5) * 1000)
            results[label] = {
                name: {"cpu": statistics.median(cpu[name]), "p50": statistics.median(p50[name])}
                for name in targets
            }
    results["rss"] = {name: rss_mib(target.pid) for name, target in targets.items()}
    return results


async def answered(
    target: Target, name: str, request: Request, total: int, concurrency: int
) -> list[float]:
    """``latencies``, or the bench's end naming the target whose request failed,
    the status and body or the exception, and the tail of the target's log."""
    try:
        return await latencies(request, total, concurrency)
    except (AssertionError, aiohttp.ClientError, asyncio.TimeoutError) as error:
        sys.exit(failed_request(name, error, target.log))


def report(results: dict[str, Any], release: str, rounds: int, cells: list[Cell]) -> str:
    rss = results["rss"]
    lines = [
        HEADING,
        "",
        f"Measured by `bench/release_bench.py` on {time.strftime('%Y-%m-%d %H:%M')}: "
        f"this commit, the previous release (`{release}`, its own venv with the same "
        "dependencies) and the floor (`bench/floor_proxy.py`: uvicorn, uvloop, httptools, "
        "one aiohttp session, bytes relayed) in front of one `toolrelay simulate`, in "
        f"{rounds} rounds, each in turn within each round. CPU is the gateway "
        "process's CPU time per request (its threads' schedstat, in ns; the median of "
        "the rounds); the machine "
        "(2 cores) was shared with other engineers' work, so read the ratios, measured "
        "side by side.",
        "",
        "| cell | CPU: this / release | CPU: this / floor | release / floor | this CPU "
        "| release CPU | floor CPU | p50: this / release | p50 this |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, *_ in cells:
        row = results[label]
        this, before, floor = row["this"], row["release"], row["floor"]
        lines.append(
            f"| {label} | **{this['cpu'] / before['cpu']:.2f}×** | "
            f"**{this['cpu'] / floor['cpu']:.2f}×** | {before['cpu'] / floor['cpu']:.2f}× | "
            f"{this['cpu']:.0f} µs | {before['cpu']:.0f} µs | {floor['cpu']:.0f} µs | "
            f"{this['p50'] / before['p50']:.2f}× | {this['p50']:.2f} ms |"
        )
    lines += [
        "",
        f"Memory at the end (RSS): this commit {rss['this']:.0f} MiB, the release "
        f"{rss['release']:.0f} MiB, the floor {rss['floor']:.0f} MiB.",
    ]
    for front, api in (("messages", "Anthropic Messages"), ("responses", "OpenAI Responses")):
        if any(cell[1] == front for cell in cells):
            asked = ", ".join(results["speaking"][front]) or "none"
            lines += [
                "",
                f"The {front} cells ask {api} of: {asked}; the others the same question as "
                f"Chat Completions (the floor has no such front to ask).",
            ]
    if "granian" in rss:
        lines += [
            "",
            "The server stack: this commit's app on granian (one worker, uvloop) against "
            "uvicorn (httptools, uvloop), same run.",
            "",
            "| cell | CPU: granian / uvicorn | p50: granian / uvicorn | granian CPU |",
            "|---|---:|---:|---:|",
        ]
        for label, *_ in cells:
            row = results[label]
            granian, this = row["granian"], row["this"]
            lines.append(
                f"| {label} | {granian['cpu'] / this['cpu']:.2f}× | "
                f"{granian['p50'] / this['p50']:.2f}× | {granian['cpu']:.0f} µs |"
            )
        lines += ["", f"Memory: granian {rss['granian']:.0f} MiB."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", help="the git ref of the previous release (default: last tag)")
    parser.add_argument("--release-python", type=Path, help="a Python with that release installed")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--granian", action="store_true", help="add this commit on granian")
    parser.add_argument(
        "--wide",
        action="store_true",
        help="add concurrency 64 and the Messages front (about 2.5x the run's time)",
    )
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    release = args.release or last_tag()
    cells = CELLS + WIDE if args.wide else CELLS
    before = args.release_python or release_python(release)
    sim_port = free_port()
    ports = {name: free_port() for name in ("this", "release", "floor", "granian")}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as scenario:
        json.dump(SCENARIO, scenario)
    direct = f"http://127.0.0.1:{sim_port}/v1"
    simulate = [sys.executable, "-m", "toolrelay", "simulate", "--port", str(sim_port)]
    simulate += ["--scenario", scenario.name, "--chunk", "4"]
    serve = ["-m", "toolrelay", "serve", "--backend", direct, "--backend-kind", "openai"]
    serve += ["--log-level", "warning", "--port"]
    floor = [sys.executable, str(ROOT / "bench" / "floor_proxy.py"), "--backend", direct]
    commands = {
        "this": [sys.executable, *serve, str(ports["this"])],
        # Started from /tmp: this checkout's toolrelay must not shadow the release's.
        "release": [str(before), *serve, str(ports["release"])],
        "floor": [*floor, "--port", str(ports["floor"])],
    }
    envs: dict[str, dict[str, str]] = {}
    if args.granian:
        granian = [sys.executable, "-m", "granian", "--interface", "asgi", "--factory"]
        granian += ["--loop", "uvloop", "--host", "127.0.0.1", "--port", str(ports["granian"])]
        commands["granian"] = [*granian, "toolrelay.server.app:app_from_environment"]
        # The app reads its settings from the environment, as a --workers worker does.
        envs["granian"] = {
            "TOOLRELAY_BACKEND": direct,
            "TOOLRELAY_BACKEND_KIND": "openai",
            "TOOLRELAYSERVE_LOGGING": "warning:text",
        }
    try:
        with ExitStack() as stack:
            stack.enter_context(
                process(simulate, direct + "/models", log=log_dir() / "simulate.log")
            )
            targets = {}
            for name, command in commands.items():
                base = f"http://127.0.0.1:{ports[name]}/v1"
                cwd = tempfile.gettempdir() if name == "release" else None
                log = log_dir() / f"{name}.log"
                proc = stack.enter_context(
                    process(command, base + "/models", cwd=cwd, env=envs.get(name), log=log)
                )
                targets[name] = Target(base, proc.pid, log)
            gateways = [n for n in targets if n != "floor"]
            speaking = {
                front: {n for n in gateways if args.wide and speaks(targets[n].base, front)}
                for front in FRONTS
            }
            results = asyncio.run(run_cells(targets, args.rounds, cells, speaking))
            results["speaking"] = {front: sorted(names) for front, names in speaking.items()}
    finally:
        os.unlink(scenario.name)
    text = report(results, release, args.rounds, cells)
    print(text)
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
