"""Parser speed, measured side by side in one run (not a test: machines are noisy).

Realistic inputs as well as lorem ipsum: one Hermes ``<tool_call>`` whose
arguments are 4k and 64k characters of plain words, of Python code (written
by ``json.dumps``, so full of ``\\n`` and ``\\"``), of JSON-heavy data (a list
of small objects); 64k of prose full of brackets before a small call; a
Qwen3-Coder XML call whose parameter is raw code. Each is

- streamed in 4-character deltas through ``StreamParser`` (µs per delta,
  and 64k against 4k: linear is 16×), beside a bare loop over the same deltas
  that calls a no-op method (the floor any streaming parser pays);
- parsed finished by ``parse_tool_calls``, beside ``json.loads`` and
  ``orjson.loads`` of the call's arguments alone;
- and, where it applies, by vLLM's own Hermes tool parser, the row to beat.

Then ``format="auto"`` against a pinned format on 64k texts with no call.

Times are CPU time of this process (``time.process_time``), best of
``REPEATS`` runs: on a shared machine, waiting for a core is not the parser's
cost, and noise only ever adds time.

vLLM's parser runs from its wheel's source, not installed (it would pull in
torch): ``vllm/tool_parsers/hermes_tool_parser.py`` is executed with small
stand-ins for the modules it imports (pydantic models with the fields of
vLLM's protocol classes, a logger, a call-id maker); its two helpers
(``partial_tag_overlap``, ``is_complete_json``) are vLLM's own, taken from
``vllm/tool_parsers/utils.py``. The wheel is ``--vllm-wheel PATH``, or
``$VLLM_WHEEL``, or fetched with ``pip download vllm --no-deps`` into
``~/.cache/toolrelay-bench``; without it the rows say why.

Run: ``.venv/bin/python bench/parser_bench.py`` (writes bench/RESULTS.md's
"Parser" section when given ``--write``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import types
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from results import write_section  # type: ignore[import-not-found]

from toolrelay import StreamParser, parse_tool_calls
from toolrelay.parse import replay_output

DELTA = 4
SIZES = (4_000, 64_000)
REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
VLLM_STREAM_REPEATS = 2  # vLLM's stream reparses the whole text at every delta: slow

SNIPPET = 'def greet(name):\n    print(f"Hello, {name}!\\n")\n    return {"ok": True}\n\n'
LOREM = "lorem ipsum dolor sit amet "
BRACKETED_PROSE = "The quick (brown) fox [jumps] over {the} lazy <dog>. "
BRACE_CODE = 'function f(x) { if (x) { return {a: [1, 2], b: "{c}"}; } } // [note] <b>\n'


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _rows(size: int) -> dict[str, Any]:
    """JSON-heavy arguments: a list of small objects, about ``size`` characters written."""
    rows: list[dict[str, Any]] = []
    written = 0
    while written < size:
        i = len(rows)
        row = {"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": 1.5, "ok": True}
        rows.append(row)
        written += len(json.dumps(row)) + 2
    return {"rows": rows}


class Shape:
    """One input: the model's text at a size, and the arguments of its call."""

    def __init__(
        self,
        label: str,
        arguments: Callable[[int], dict[str, Any]],
        text: Callable[[dict[str, Any]], str] | None = None,
        *,
        hermes: bool = True,
        call: bool = True,
    ) -> None:
        self.label = label
        self._arguments = arguments
        self._text = text or _hermes_call
        self.hermes = hermes  # vLLM's Hermes parser reads it
        self.call = call  # the arguments are the text's call (not prose around a small one)

    def arguments_json(self, size: int) -> str:
        return json.dumps(self._arguments(size))

    def text(self, size: int) -> str:
        return self._text(self._arguments(size))


def _hermes_call(arguments: dict[str, Any]) -> str:
    body = json.dumps({"name": "write_file", "arguments": arguments})
    return f"<tool_call>{body}</tool_call>"


def _prose_then_call(arguments: dict[str, Any]) -> str:
    return arguments["prose"] + _hermes_call({"x": 1})


def _xml_call(arguments: dict[str, Any]) -> str:
    return (
        "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n"
        f"<parameter=text>\n{arguments['text']}\n</parameter>\n</function>\n</tool_call>"
    )


SHAPES = [
    Shape("lorem ipsum", lambda n: {"path": "a.txt", "text": _repeat(LOREM, n)}),
    Shape("code with escapes", lambda n: {"path": "a.py", "text": _repeat(SNIPPET, n)}),
    Shape("JSON-heavy arguments", _rows),
    Shape(
        "prose with many brackets, then a small call",
        lambda n: {"prose": _repeat(BRACKETED_PROSE, n)},
        _prose_then_call,
        call=False,
    ),
    Shape(
        "Qwen3-Coder XML call, code parameter",
        lambda n: {"path": "a.py", "text": _repeat(SNIPPET, n)},
        _xml_call,
        hermes=False,
    ),
]


def deltas(text: str) -> list[str]:
    return [text[i : i + DELTA] for i in range(0, len(text), DELTA)]


class _Floor:
    def feed(self, delta: str) -> list[object]:
        return []

    def close(self) -> list[object]:
        return []


def best(work: Callable[[], object], repeats: int = REPEATS) -> float:
    """Best CPU time of ``repeats`` runs."""
    runs = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        runs.append(time.process_time() - start)
    return min(runs)


def stream_time(chunks: list[str], make: Callable[[], Any], repeats: int = REPEATS) -> float:
    def run() -> None:
        parser = make()
        feed = parser.feed
        for chunk in chunks:
            feed(chunk)
        parser.close()

    return best(run, repeats)


# -- vLLM's Hermes tool parser, from its wheel -----------------------------------------


def vllm_wheel() -> Path | str:
    """The wheel's path, or why there is none."""
    for i, arg in enumerate(sys.argv):
        if arg == "--vllm-wheel" and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1])
    if os.environ.get("VLLM_WHEEL"):
        return Path(os.environ["VLLM_WHEEL"])
    cache = Path.home() / ".cache" / "toolrelay-bench"
    found = sorted(cache.glob("vllm-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "vllm", "--no-deps", "-d", str(cache)]
        try:
            subprocess.run(command, capture_output=True, timeout=900, check=True)
        except (OSError, subprocess.SubprocessError) as error:
            return f"`pip download vllm --no-deps` failed ({type(error).__name__})"
        found = sorted(cache.glob("vllm-*.whl"))
    return found[-1] if found else "no vllm wheel was downloaded"


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def _stand_ins(utils_source: str) -> None:
    """The modules hermes_tool_parser imports, as small stand-ins (see the docstring)."""
    import logging
    import re

    try:
        import regex  # noqa: F401  (what vLLM uses; the standard module reads its patterns too)
    except ImportError:
        sys.modules["regex"] = re

    from pydantic import BaseModel, Field

    class FunctionCall(BaseModel):
        name: str
        arguments: str

    class ToolCall(BaseModel):
        id: str = Field(default_factory=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}")
        type: str = "function"
        function: FunctionCall

    class DeltaFunctionCall(BaseModel):
        name: str | None = None
        arguments: str | None = None

    class DeltaToolCall(BaseModel):
        id: str | None = None
        type: str | None = None
        index: int
        function: dict[str, Any] | DeltaFunctionCall | None = None

    class DeltaMessage(BaseModel):
        role: str | None = None
        content: str | None = None
        reasoning: str | None = None
        tool_calls: list[DeltaToolCall] = Field(default_factory=list)

    class ExtractedToolCallInformation(BaseModel):
        tools_called: bool
        tool_calls: list[ToolCall]
        content: str | None = None

    class ToolParser:  # the attributes vLLM's base class sets
        def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
            self.prev_tool_call_arr: list[dict[str, Any]] = []
            self.current_tool_id = -1
            self.current_tool_name_sent = False
            self.streamed_args_for_tool: list[str] = []
            self.model_tokenizer = tokenizer
            self.tools = tools or []

    # vLLM's own helpers, compiled from its utils module (which imports much more).
    helpers: dict[str, Any] = {"json": json, "JSONDecodeError": json.JSONDecodeError}
    tree = ast.parse(utils_source)
    wanted = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name in ("partial_tag_overlap", "is_complete_json")
    ]
    code = compile(ast.Module(body=wanted, type_ignores=[]), "vllm/tool_parsers/utils.py", "exec")
    exec(code, helpers)

    for package in ("vllm", "vllm.entrypoints", "vllm.entrypoints.generate", "vllm.tool_parsers"):
        _module(package, __path__=[])
    _module(
        "vllm.entrypoints.generate.base.protocol",
        DeltaFunctionCall=DeltaFunctionCall,
        DeltaMessage=DeltaMessage,
        DeltaToolCall=DeltaToolCall,
        ExtractedToolCallInformation=ExtractedToolCallInformation,
        FunctionCall=FunctionCall,
        ToolCall=ToolCall,
    )
    _module("vllm.entrypoints.openai.chat_completion.protocol", ChatCompletionRequest=object)
    _module("vllm.entrypoints.openai.responses.protocol", ResponsesRequest=object)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module(
        "vllm.renderers.chat_utils", make_tool_call_id=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}"
    )
    _module("vllm.tokenizers", TokenizerLike=object)
    _module("vllm.tool_parsers.abstract_tool_parser", Tool=object, ToolParser=ToolParser)
    _module(
        "vllm.tool_parsers.utils",
        partial_tag_overlap=helpers["partial_tag_overlap"],
        is_complete_json=helpers["is_complete_json"],
    )
    _module("vllm.utils.mistral", is_mistral_tokenizer=lambda tokenizer: False)


def load_vllm_hermes() -> tuple[type, str] | str:
    """vLLM's Hermes2ProToolParser and the wheel's version, or why it cannot run."""
    wheel = vllm_wheel()
    if isinstance(wheel, str):
        return wheel
    try:
        with zipfile.ZipFile(wheel) as archive:
            parser_source = archive.read("vllm/tool_parsers/hermes_tool_parser.py").decode()
            utils_source = archive.read("vllm/tool_parsers/utils.py").decode()
        _stand_ins(utils_source)
        module = _module("vllm.tool_parsers.hermes_tool_parser")
        code = compile(parser_source, "vllm/tool_parsers/hermes_tool_parser.py", "exec")
        exec(code, module.__dict__)
        parser_class = module.Hermes2ProToolParser
        parser_class(tokenizer=object()).extract_tool_calls(_hermes_call({"x": 1}), None)
    except Exception as error:  # any failure to run it is reported, not raised
        why = f"{type(error).__name__}: {error}"
        return f"vLLM's Hermes parser did not run from {wheel.name}: {why}"
    version = wheel.name.split("-")[1]
    return parser_class, version


class VllmStream:
    """vLLM's streaming call as its server makes it: the whole text so far, each delta."""

    def __init__(self, parser_class: type) -> None:
        self._parser = parser_class(tokenizer=object())
        self._text = ""

    def feed(self, delta: str) -> object:
        previous = self._text
        self._text = previous + delta
        return self._parser.extract_tool_calls_streaming(
            previous, self._text, delta, [], [], [], None
        )

    def close(self) -> None:
        return None


# -- the report ---------------------------------------------------------------------------


def finished_table(vllm_class: type | None, vllm_label: str) -> list[str]:
    """The finished parse of one call at each size: the fast path where it applies, the
    replay through the stream parser (what every call paid before it), the references."""
    lines = [
        "",
        f"| finished call | parse_tool_calls | the replay | json.loads of the arguments | "
        f"ratio | orjson.loads | {vllm_label} extract_tool_calls | ours / vLLM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in SIZES:
        # Each sample runs the parse often enough to last about a millisecond.
        times = max(1, 256_000 // size)

        def per_call(work: Callable[[], object], times: int = times) -> float:
            return best(lambda: [work() for _ in range(times)]) / times

        for shape in SHAPES:
            if not shape.call:
                continue
            text = shape.text(size)
            arguments = shape.arguments_json(size)
            parse = per_call(lambda t=text: parse_tool_calls(t))  # type: ignore[misc]
            replay = per_call(lambda t=text: replay_output(t))  # type: ignore[misc]
            loads = per_call(lambda a=arguments: json.loads(a))  # type: ignore[misc]
            fast = per_call(lambda a=arguments: orjson.loads(a))  # type: ignore[misc]
            theirs = against = "—"
            if vllm_class is not None and shape.hermes:
                extract = vllm_class(tokenizer=object()).extract_tool_calls
                spent = per_call(lambda t=text, e=extract: e(t, None))  # type: ignore[misc]
                theirs, against = f"{spent * 1e6:.0f} µs", f"{parse / spent:.2f}×"
            lines.append(
                f"| {shape.label}, {size // 1000}k | {parse * 1e6:.0f} µs | {replay * 1e6:.0f} µs "
                f"| {loads * 1e6:.0f} µs | {parse / loads:.1f}× | {fast * 1e6:.0f} µs | {theirs} "
                f"| {against} |"
            )
    return lines


def main() -> str:
    vllm = load_vllm_hermes()
    vllm_class = vllm[0] if isinstance(vllm, tuple) else None
    vllm_label = f"vLLM {vllm[1]} Hermes" if isinstance(vllm, tuple) else "vLLM Hermes"
    small, large = SIZES
    lines = [
        "## Parser",
        "",
        f"Measured by `bench/parser_bench.py` on {time.strftime('%Y-%m-%d')}, Python "
        f"{sys.version.split()[0]}, CPU time of the process, best of {REPEATS} runs "
        f"({VLLM_STREAM_REPEATS} for vLLM's stream), {DELTA}-character deltas, on the shared "
        "2-core machine (other work ran beside it). Each input is one Hermes `<tool_call>` "
        "(or the text around it) at 4k and 64k characters of argument; the bare loop calls "
        "a no-op `feed` per delta.",
        "",
        f"| stream | 4k: per delta | 64k: per delta | 64k / 4k (16× the text) | bare loop | "
        f"{vllm_label}, 4k | {vllm_label}, 64k |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for shape in SHAPES:  # warm up: first runs on an idle machine pay for waking the CPU
        stream_time(deltas(shape.text(small)), StreamParser, 1)
    worst = 0.0
    worst_ratio = 0.0
    for shape in SHAPES:
        per: list[float] = []
        totals: list[float] = []
        for size in SIZES:
            chunks = deltas(shape.text(size))
            total = stream_time(chunks, StreamParser)
            totals.append(total)
            per.append(total / len(chunks) * 1e6)
        chunks = deltas(shape.text(large))
        floor = stream_time(chunks, _Floor) / len(chunks) * 1e6
        theirs = ["—", "—"]
        if vllm_class is not None and shape.hermes:
            for i, size in enumerate(SIZES):
                their_chunks = deltas(shape.text(size))
                spent = stream_time(
                    their_chunks, lambda: VllmStream(vllm_class), VLLM_STREAM_REPEATS
                )
                theirs[i] = f"{spent / len(their_chunks) * 1e6:.1f} µs"
        worst = max(worst, *per)
        worst_ratio = max(worst_ratio, totals[1] / totals[0])
        lines.append(
            f"| {shape.label} | {per[0]:.2f} µs | {per[1]:.2f} µs | {totals[1] / totals[0]:.1f}× "
            f"| {floor:.3f} µs | {theirs[0]} | {theirs[1]} |"
        )
    lines += finished_table(vllm_class, vllm_label)
    lines += [
        "",
        '| 64k characters, no call | format="auto" | format="hermes" | ratio |',
        "|---|---:|---:|---:|",
    ]
    worst_auto = 0.0
    for label, text in (
        ("prose with many brackets", _repeat(BRACKETED_PROSE, large)),
        ("lorem ipsum", _repeat(LOREM, large)),
        ("code full of braces and tags", _repeat(BRACE_CODE, large)),
    ):
        auto = best(lambda t=text: parse_tool_calls(t))  # type: ignore[misc]
        pinned = best(lambda t=text: parse_tool_calls(t, format="hermes"))  # type: ignore[misc]
        worst_auto = max(worst_auto, auto / pinned)
        lines.append(
            f"| {label} | {auto * 1e3:.2f} ms | {pinned * 1e3:.2f} ms | {auto / pinned:.1f}× |"
        )
    lines += [""]
    if vllm_class is None:
        lines += [f"vLLM's Hermes parser: not measured: {vllm}.", ""]
    lines += [
        f"Goals (issue 16): ≤ 2 µs per delta on every input (worst here {worst:.2f} µs), "
        f"linear (64k ≤ 20× 4k; worst {worst_ratio:.1f}×), `auto` within 2× of a "
        f"pinned format on prose (worst {worst_auto:.1f}×).",
        "",
        "Where the time goes. A delta goes through about two dozen Python calls (parser, "
        "region, argument run, call, event): that is the per-delta cost on every input, "
        "text and escapes alike, since a run of string text, escapes included, is one "
        "regular expression match and goes out as written when its escapes are those "
        "JsonWriter writes; a small object or list inside the arguments waits until it is "
        "complete and is read by the C decoder at once. A finished call is read by "
        "`json`'s C scanner and its arguments written once by orjson; one clean Hermes call "
        "is then taken as it is (`toolrelay.finished`), anything else replayed through "
        "the same state machine as a stream (the replay column). `auto` looks at `{` and `[` "
        "(bare JSON calls, Python "
        "call lists) where a pinned Hermes does not; a bracket no format could claim is "
        "passed over inside the marker search's regular expression, and markup-dense code "
        "pays for the larger pattern. vLLM's streaming parser reads the whole text again "
        "at every delta: its cost per delta grows with the text.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--finished" in sys.argv:  # the finished table alone: a short run
        vllm = load_vllm_hermes()
        label = f"vLLM {vllm[1]} Hermes" if isinstance(vllm, tuple) else "vLLM Hermes"
        print("\n".join(finished_table(vllm[0] if isinstance(vllm, tuple) else None, label)))
        raise SystemExit(0)
    report = main()
    print(report)
    if "--write" in sys.argv:
        write_section("## Parser", report)
