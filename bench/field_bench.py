"""The gateway benchmark in the field's own method: toolrelay, the floor and LiteLLM, one run.

Usage: .venv/bin/python bench/field_bench.py [--litellm-python PY] [--write]  (about 5-8 min)

Gateways are usually compared by what they add at p99 and by the load they carry
under a latency bound, not by their p50 alone. This bench starts one
``toolrelay simulate`` and, in front of it, three gateways as subprocesses on
free 127.0.0.1 ports: toolrelay (this checkout), the floor
(``bench/floor_proxy.py``: the same server stack relaying bytes) and the
LiteLLM proxy, the anchor, from its own venv under ``/tmp`` (made on first use
with ``pip install 'litellm[proxy]'``, kept for the next run; never a
dependency of the project). It measures, ratios first:

* the p50 and p99 each adds at concurrency 1 to the simulator's own answer,
  and its CPU per request, on Chat Completions without and with tools and on
  the translation lane (Anthropic Messages in, Chat Completions to the backend;
  the floor cannot translate, so its row there is the Chat Completions relay);
* the throughput each sustains under p99 bounds of 1, 5, 10 and 50 ms: one
  closed-loop sweep per target, concurrency doubled from 1 to 64 with each step
  bounded in time, stopped once p99 passes the widest bound;
* on a paced stream (a second simulator with ``--delay-ms``), the time to the
  first content chunk and the gap between chunks, on both fronts.

The client, the gateways and the backend share the machine's cores: the direct
row of the sweep is the most the client and the simulator can do without a
gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from gateway_bench import PLAIN, ROOT, TOOL, free_port, percentile, process
from release_bench import CHAT, MESSAGES, family_cpu, messages_body, rss_mib
from results import write_section

HEADING = "## The field's method: p99, p99-bounded throughput, TTFT, translation (issue 29)"
STREAM_CHUNKS = 128
PACED_CHUNKS = 32
PACED_DELAY_MS = 5
# Every chunk different: LiteLLM ends a stream that repeats one chunk 100 times in a row.
STREAM_TEXT = "".join(f"{n:04d}" for n in range(STREAM_CHUNKS))
PACED_TEXT = STREAM_TEXT[: 4 * PACED_CHUNKS]
SCENARIO = {
    "models": ["bench"],
    "rules": [
        {"match": {"last_user": "paced"}, "answer": {"content": PACED_TEXT}},
        {"match": {"last_user": "stream"}, "answer": {"content": STREAM_TEXT}},
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"answer": {"content": "Hello, this is a short answer."}},
    ],
}
GATEWAYS = ("toolrelay", "floor", "litellm")
TARGETS = ("direct", *GATEWAYS)
BOUNDS_MS = (1, 5, 10, 50)
SWEEP_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
STEP_SECONDS = 1.0
REPEATS = 3
# Who speaks Anthropic Messages: the others get the same question as Chat Completions.
TRANSLATES = ("toolrelay", "litellm")


def chat_body(text: str, stream: bool = False, tools: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": text}]}
    if tools:
        body["tools"] = [TOOL]
    return {**body, "stream": True} if stream else body


# A cell: label, streamed, requests per round, and per target the (path, body) it is sent.
Cell = tuple[str, bool, int, Callable[[str], tuple[str, dict[str, Any]]]]
CELLS: list[Cell] = [
    ("chat plain", False, 150, lambda _t: (CHAT, PLAIN)),
    ("chat tools", False, 150, lambda _t: (CHAT, {**PLAIN, "tools": [TOOL]})),
    (
        "messages → chat plain",
        False,
        150,
        lambda t: (MESSAGES, messages_body("hi")) if t in TRANSLATES else (CHAT, PLAIN),
    ),
    (
        "messages → chat, stream 128 chunks",
        True,
        20,
        lambda t: (
            (MESSAGES, messages_body("stream", True))
            if t in TRANSLATES
            else (CHAT, chat_body("stream", True))
        ),
    ),
]


def litellm_python() -> Path:
    """The Python of a venv holding the LiteLLM proxy, made under /tmp on first use."""
    home = Path(tempfile.gettempdir()) / "toolrelay-bench-litellm"
    python = home / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        install = [str(python), "-m", "pip", "install", "--quiet", "litellm[proxy]"]
        subprocess.run(install, check=True, timeout=900)
    return python


def litellm_version(python: Path) -> str:
    script = "import importlib.metadata as m; print(m.version('litellm'))"
    return subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, check=True
    ).stdout.strip()


def litellm_config(backends: dict[str, str]) -> str:
    """A config file routing each model name to an OpenAI-compatible backend."""
    models = [
        {
            "model_name": name,
            "litellm_params": {"model": "openai/bench", "api_base": base, "api_key": "none"},
        }
        for name, base in backends.items()
    ]
    # No key, as toolrelay and the floor here check none (LiteLLM refuses that unless told).
    keyless = {"dangerously_permit_weak_or_unset_master_key": True}
    config = {
        "model_list": models,
        # Its Messages front calls OpenAI backends' Responses API unless told otherwise.
        "litellm_settings": {
            "telemetry": False,
            "use_chat_completions_url_for_anthropic_messages": True,
        },
        "general_settings": keyless,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        json.dump(config, handle)  # JSON is YAML
    return handle.name


def text_of(line: bytes) -> str:
    """The answer text a streamed event carries, in either API's shape."""
    if not line.startswith(b"data: {"):
        return ""
    event = orjson.loads(line[6:])
    if "choices" in event:
        choices = event["choices"]
        return (choices[0].get("delta") or {}).get("content") or "" if choices else ""
    if event.get("type") == "content_block_delta":
        return str(event["delta"].get("text") or "")
    return ""


Request = Callable[[], Awaitable[None]]


def make_request(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], streamed: bool
) -> Request:
    data = orjson.dumps(body)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer none"}

    async def go() -> None:
        async with session.post(url, data=data, headers=headers) as response:
            payload = await response.read()
            assert response.status == 200, payload[:300]
            if streamed:
                text = "".join(text_of(line) for line in payload.splitlines())
                assert text == STREAM_TEXT, payload[-600:]

    return go


async def timed(request: Request, total: int) -> list[float]:
    out = []
    for _ in range(total):
        start = time.perf_counter()
        await request()
        out.append(time.perf_counter() - start)
    return out


async def latency_cells(
    session: aiohttp.ClientSession, bases: dict[str, str], pids: dict[str, int], rounds: int
) -> dict[str, Any]:
    """Per cell and target at concurrency 1: p50, p99 (ms) and CPU µs per request."""
    results: dict[str, Any] = {}
    for label, streamed, total, route in CELLS:
        requests = {}
        for name in TARGETS:
            path, body = route(name)
            requests[name] = make_request(session, bases[name] + path, body, streamed)
            await timed(requests[name], min(total, 20))  # warm up
        times: dict[str, list[float]] = {name: [] for name in TARGETS}
        # One request to each target in turn, so that a busy neighbour on the shared
        # machine weighs on all alike; an idle gateway's CPU meanwhile is next to none.
        cpu = {name: family_cpu(pids[name]) for name in TARGETS}
        for turn in range(total * rounds):
            for name in TARGETS[turn % len(TARGETS) :] + TARGETS[: turn % len(TARGETS)]:
                start = time.perf_counter()
                await requests[name]()
                times[name].append(time.perf_counter() - start)
        cpu = {name: family_cpu(pids[name]) - cpu[name] for name in TARGETS}
        results[label] = {
            name: {
                "p50": percentile(times[name], 0.5) * 1000,
                "p99": percentile(times[name], 0.99) * 1000,
                "cpu": cpu[name] / (total * rounds) * 1e6,
            }
            for name in TARGETS
        }
    return results


async def closed_loop(request: Request, concurrency: int, seconds: float) -> tuple[float, float]:
    """Requests per second and p99 (ms) of ``concurrency`` workers for ``seconds``."""
    times: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await request()
            times.append(time.perf_counter() - start)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(times) / (time.perf_counter() - began), percentile(times, 0.99) * 1000


async def sweep(session: aiohttp.ClientSession, bases: dict[str, str]) -> dict[str, Any]:
    """Per target: (concurrency, rps, p99 ms) per step, until p99 passes the widest bound."""
    requests = {name: make_request(session, bases[name] + CHAT, PLAIN, False) for name in TARGETS}
    out: dict[str, Any] = {name: [] for name in TARGETS}
    for name in TARGETS:
        await closed_loop(requests[name], 4, 0.3)  # warm up
    # Each step for every target, in turn and REPEATS times, before the next step: the load
    # of the moment weighs on all alike; a step's figures are the medians of its repeats.
    for concurrency in SWEEP_CONCURRENCY:
        live = [name for name in TARGETS if not out[name] or out[name][-1][2] <= max(BOUNDS_MS)]
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in live}
        for _ in range(REPEATS):
            for name in live:
                runs[name].append(await closed_loop(requests[name], concurrency, STEP_SECONDS))
        for name in live:
            rps = statistics.median(r for r, _ in runs[name])
            p99 = statistics.median(p for _, p in runs[name])
            out[name].append((concurrency, rps, p99))
    return out


def sustained(steps: list[tuple[int, float, float]], bound: float) -> tuple[float, int] | None:
    """The best throughput among the steps whose p99 stays within ``bound`` ms."""
    within = [(rps, concurrency) for concurrency, rps, p99 in steps if p99 <= bound]
    return max(within) if within else None


async def paced_streams(
    session: aiohttp.ClientSession, bases: dict[str, str], streams: int
) -> dict[str, Any]:
    """Time to the first content chunk and the gaps between content chunks (ms)."""
    lanes = [("chat", name) for name in TARGETS] + [("messages", name) for name in TRANSLATES]
    first: dict[tuple[str, str], list[float]] = {lane: [] for lane in lanes}
    gaps: dict[tuple[str, str], list[float]] = {lane: [] for lane in lanes}
    headers = {"Content-Type": "application/json", "Authorization": "Bearer none"}
    for _ in range(streams):
        for front, name in lanes:  # one stream to each in turn
            path, body = (
                (MESSAGES, messages_body("paced", True))
                if front == "messages"
                else (CHAT, chat_body("paced", True))
            )
            if name == "litellm":
                body = {**body, "model": "paced"}  # LiteLLM's route to the paced simulator
            seen: list[float] = []
            start = time.perf_counter()
            url = bases[name] + path
            async with session.post(url, data=orjson.dumps(body), headers=headers) as resp:
                assert resp.status == 200, await resp.read()
                async for line in resp.content:
                    if text_of(line):
                        seen.append(time.perf_counter())
            assert len(seen) >= PACED_CHUNKS // 2, len(seen)
            first[front, name].append((seen[0] - start) * 1000)
            gaps[front, name] += [(b - a) * 1000 for a, b in itertools.pairwise(seen)]
    return {
        f"{front} {name}": {
            "ttft p50": percentile(first[front, name], 0.5),
            "ttft p90": percentile(first[front, name], 0.9),
            "gap p50": percentile(gaps[front, name], 0.5),
            "gap p99": percentile(gaps[front, name], 0.99),
            "chunks": len(gaps[front, name]) / streams + 1,
        }
        for front, name in lanes
    }


async def run(
    bases: dict[str, str], paced: dict[str, str], pids: dict[str, int], rounds: int, streams: int
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=128, keepalive_timeout=2)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return {
            "latency": await latency_cells(session, bases, pids, rounds),
            "sweep": await sweep(session, bases),
            "paced": await paced_streams(session, paced, streams),
            "rss": {name: rss_mib(pids[name]) for name in GATEWAYS},
        }


def _ratio(a: float, b: float) -> str:
    """``a / b``, or — where either is not above zero (an added p99 lost in the noise)."""
    return f"{a / b:.2f}×" if a > 0 and b > 0 else "—"


def report(results: dict[str, Any], meta: dict[str, str]) -> str:
    latency, sweep_steps, paced = results["latency"], results["sweep"], results["paced"]
    lines = [
        HEADING,
        "",
        f"Measured by `bench/field_bench.py` on {meta['when']} (load average before the run "
        f"{meta['load_before']}, after {meta['load_after']}; {meta['cores']} cores shared with "
        f"other engineers' work; the run took {meta['minutes']} min): toolrelay (this commit), "
        "the floor (`bench/floor_proxy.py`) and the LiteLLM proxy "
        f"{meta['litellm']} (its own venv under /tmp, one worker) in front of one "
        "`toolrelay simulate`, all in one run. Client, gateways and simulator share the "
        "cores, so read the ratios.",
        "",
        "**Added latency at concurrency 1** (the gateway's p50 and p99 less the simulator's "
        "own, one request to each in turn) and CPU per request (the gateway's processes, "
        "user + system). "
        "On the translation lane toolrelay and LiteLLM take Anthropic Messages and call the "
        "simulator's Chat Completions; the floor and the direct row carry the same question "
        "as Chat Completions, untranslated.",
        "",
        "| cell | CPU: toolrelay / floor | toolrelay / LiteLLM | added p99: toolrelay / "
        "LiteLLM | toolrelay / floor | added p99 toolrelay | floor | LiteLLM "
        "| added p50 toolrelay | floor | LiteLLM | CPU toolrelay | floor | LiteLLM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, *_ in CELLS:
        row = latency[label]
        added = {q: {n: row[n][q] - row["direct"][q] for n in GATEWAYS} for q in ("p50", "p99")}
        p99, p50 = added["p99"], added["p50"]
        cpu = {n: row[n]["cpu"] for n in GATEWAYS}
        lines.append(
            f"| {label} | **{_ratio(cpu['toolrelay'], cpu['floor'])}** | "
            f"**{_ratio(cpu['toolrelay'], cpu['litellm'])}** | "
            f"**{_ratio(p99['toolrelay'], p99['litellm'])}** | "
            f"{_ratio(p99['toolrelay'], p99['floor'])} | "
            f"{p99['toolrelay']:.2f} ms | {p99['floor']:.2f} ms | {p99['litellm']:.2f} ms | "
            f"{p50['toolrelay']:.2f} ms | {p50['floor']:.2f} ms | {p50['litellm']:.2f} ms | "
            f"{cpu['toolrelay']:.0f} µs | {cpu['floor']:.0f} µs | {cpu['litellm']:.0f} µs |"
        )
    lines += [
        "",
        "Direct (the simulator alone) at concurrency 1: "
        + "; ".join(
            f"{label} p50 {latency[label]['direct']['p50']:.2f} ms, "
            f"p99 {latency[label]['direct']['p99']:.2f} ms"
            for label, *_ in CELLS
        )
        + ".",
        "",
        "**Throughput under a p99 bound** (Chat Completions, no tools, non-streamed): "
        "requests per second, the best step of one closed-loop sweep (concurrency 1, 2, 4 "
        f"… 64; each step {REPEATS} times {STEP_SECONDS} s, the targets in turn, its figures "
        f"the medians; stopped once p99 passed {max(BOUNDS_MS)} ms) whose "
        "p99 (the whole round trip, not the added part) stayed within the bound; the step's "
        "concurrency in brackets; — where no step did.",
        "",
        "| p99 bound | toolrelay / floor | toolrelay / LiteLLM | toolrelay | floor | LiteLLM "
        "| direct |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(name: str, bound: float) -> str:
        best = sustained(sweep_steps[name], bound)
        return f"{best[0]:.0f} (c={best[1]})" if best else "—"

    def rps(name: str, bound: float) -> float:
        best = sustained(sweep_steps[name], bound)
        return best[0] if best else 0.0

    for bound in BOUNDS_MS:
        lines.append(
            f"| {bound} ms | **{_ratio(rps('toolrelay', bound), rps('floor', bound))}** | "
            f"**{_ratio(rps('toolrelay', bound), rps('litellm', bound))}** | "
            + " | ".join(cell(name, bound) for name in ("toolrelay", "floor", "litellm", "direct"))
            + " |"
        )
    lines += ["", "The sweep's steps (concurrency: requests per second, p99):", ""]
    for name in TARGETS:
        steps = ", ".join(f"c={c}: {r:.0f}/s, {p:.1f} ms" for c, r, p in sweep_steps[name])
        lines.append(f"- {name}: {steps}")
    lines += [
        "",
        f"**A paced stream** ({PACED_CHUNKS} chunks of 4 characters, {PACED_DELAY_MS} ms "
        "apart from a second simulator): the time from sending the request to the first "
        "content chunk (TTFT) and the gap between content chunks, as the client sees them, "
        "in ms (TTFT at p90: the p99 of a few dozen streams is their slowest one); added is "
        "less the direct row, one stream to each in turn. The Messages front is the "
        "translation lane.",
        "",
        "| front, target | TTFT p50 | TTFT p90 | added TTFT p50 | added TTFT p90 "
        "| gap p50 | gap p99 | added gap p99 | content chunks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    direct = paced["chat direct"]
    for key, row in paced.items():
        lines.append(
            f"| {key} | {row['ttft p50']:.2f} | {row['ttft p90']:.2f} | "
            f"{row['ttft p50'] - direct['ttft p50']:+.2f} | "
            f"{row['ttft p90'] - direct['ttft p90']:+.2f} | {row['gap p50']:.2f} | "
            f"{row['gap p99']:.2f} | {row['gap p99'] - direct['gap p99']:+.2f} | "
            f"{row['chunks']:.0f} |"
        )
    rss = results["rss"]
    lines += [
        "",
        f"Memory at the end (RSS): toolrelay {rss['toolrelay']:.0f} MiB, the floor "
        f"{rss['floor']:.0f} MiB, LiteLLM {rss['litellm']:.0f} MiB.",
    ]
    return "\n".join(lines) + "\n"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm-python", type=Path, help="a Python with litellm[proxy]")
    parser.add_argument("--rounds", type=int, default=3, help="latency cells' requests × this")
    parser.add_argument("--streams", type=int, default=32, help="paced streams per target")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    python = args.litellm_python or litellm_python()
    started = time.monotonic()
    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_average(),
        "cores": str(os.cpu_count()),
        "litellm": litellm_version(python),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as scenario:
        json.dump(SCENARIO, scenario)
    sims = {"flat": free_port(), "paced": free_port()}
    backend = {kind: f"http://127.0.0.1:{port}/v1" for kind, port in sims.items()}
    config = litellm_config({"bench": backend["flat"], "paced": backend["paced"]})
    serve = [sys.executable, "-m", "toolrelay", "serve", "--backend-kind", "openai"]
    serve += ["--log-level", "warning"]
    floor = [sys.executable, str(ROOT / "bench" / "floor_proxy.py")]
    litellm = [str(python.parent / "litellm"), "--config", config, "--host", "127.0.0.1"]
    litellm_env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    pids: dict[str, int] = {}
    try:
        with ExitStack() as stack:
            for kind, port in sims.items():
                simulate = [sys.executable, "-m", "toolrelay", "simulate", "--port", str(port)]
                simulate += ["--scenario", scenario.name, "--chunk", "4"]
                if kind == "paced":
                    simulate += ["--delay-ms", str(PACED_DELAY_MS)]
                sim = stack.enter_context(process(simulate, backend[kind] + "/models"))
                if kind == "flat":
                    pids["direct"] = sim.pid
            bases = {"direct": backend["flat"]}
            paced = {"direct": backend["paced"]}
            for kind, into in (("flat", bases), ("paced", paced)):
                for name, command in (
                    ("toolrelay", [*serve, "--backend", backend[kind]]),
                    ("floor", [*floor, "--backend", backend[kind]]),
                ):
                    port = free_port()
                    into[name] = f"http://127.0.0.1:{port}"
                    proc = stack.enter_context(
                        process([*command, "--port", str(port)], into[name] + "/v1/models")
                    )
                    if kind == "flat":
                        pids[name] = proc.pid
            port = free_port()
            bases["litellm"] = paced["litellm"] = f"http://127.0.0.1:{port}"
            proc = stack.enter_context(
                process(
                    [*litellm, "--port", str(port), "--num_workers", "1"],
                    bases["litellm"] + "/v1/models",
                    cwd=tempfile.gettempdir(),
                    env=litellm_env,
                    startup=120,
                )
            )
            pids["litellm"] = proc.pid
            bases = {name: base.removesuffix("/v1") for name, base in bases.items()}
            paced = {name: base.removesuffix("/v1") for name, base in paced.items()}
            results = asyncio.run(run(bases, paced, pids, args.rounds, args.streams))
    finally:
        os.unlink(scenario.name)
        os.unlink(config)
    meta["load_after"] = load_average()
    meta["minutes"] = f"{(time.monotonic() - started) / 60:.1f}"
    text = report(results, meta)
    print(text)
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
