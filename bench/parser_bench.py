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
- and, where it applies, by vLLM's own Hermes or Qwen3-Coder tool parser,
  the row to beat.

Then ``format="auto"`` against a pinned format on 64k texts with no call.

Times are CPU time of this process (``time.process_time``), best of
``REPEATS`` runs: on a shared machine, waiting for a core is not the parser's
cost, and noise only ever adds time.

vLLM's parsers run from its wheel's source, not installed (it would pull in
torch): see ``bench/vllm_parsers.py`` for what runs as vLLM wrote it and what
is stood in. The Qwen3-Coder call is parsed twice: as it comes, and with the
tool declared (its parameters typed as strings), as a Qwen3-Coder deployment
calls it; vLLM's ``qwen3_coder`` parser is given the same tools.

Run: ``.venv/bin/python bench/parser_bench.py`` (writes bench/RESULTS.md's
"Parser" section when given ``--write``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from openai.types.responses import FunctionTool
from results import write_section  # type: ignore[import-not-found]
from vllm_parsers import (  # type: ignore[import-not-found]
    Tokenizer,
    VllmStream,
    load_vllm_hermes,
    load_vllm_qwen3_coder,
)

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
        vllm: str = "hermes",
        call: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        self.label = label
        self._arguments = arguments
        self._text = text or _hermes_call
        self.vllm = vllm  # which of vLLM's parsers reads it
        self.call = call  # the arguments are the text's call (not prose around a small one)
        self.tools = tools  # the request's tools

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


XML_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        },
    },
}


def _vllm_tools(tools: list[dict[str, Any]] | None) -> list[FunctionTool] | None:
    """The same tools as vLLM reads them (the OpenAI SDK's ``FunctionTool``)."""
    if tools is None:
        return None
    return [FunctionTool(type="function", strict=False, **t["function"]) for t in tools]


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
        vllm="qwen3_coder",
    ),
    Shape(
        "Qwen3-Coder XML call, code parameter, tool declared",
        lambda n: {"path": "a.py", "text": _repeat(SNIPPET, n)},
        _xml_call,
        vllm="qwen3_coder",
        tools=[XML_TOOL],
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


def interleaved(works: list[Callable[[], object]], times: int) -> list[float]:
    """Best CPU time per call of each work over ``REPEATS`` rounds in which the works
    take turns (each run ``times`` times): a burst of the machine's other work falls
    on all of them alike, not on one column."""
    bests = [float("inf")] * len(works)
    for _ in range(REPEATS):
        for i, work in enumerate(works):
            start = time.process_time()
            for _ in range(times):
                work()
            bests[i] = min(bests[i], (time.process_time() - start) / times)
    return bests


def stream_time(chunks: list[str], make: Callable[[], Any], repeats: int = REPEATS) -> float:
    def run() -> None:
        parser = make()
        feed = parser.feed
        for chunk in chunks:
            feed(chunk)
        parser.close()

    return best(run, repeats)


class Vllm:
    """vLLM's parsers as this run loaded them (None: not loaded, and why in ``missing``)."""

    def __init__(self) -> None:
        hermes = load_vllm_hermes(_hermes_call({"x": 1}))
        qwen3_coder = load_vllm_qwen3_coder(_xml_call({"text": "x"}))
        self.hermes = hermes[0] if isinstance(hermes, tuple) else None
        self.qwen3_coder = qwen3_coder if isinstance(qwen3_coder, type) else None
        self.label = f"vLLM {hermes[1]}" if isinstance(hermes, tuple) else "vLLM"
        # Without a wheel both say the same: once.
        self.missing = list(dict.fromkeys(w for w in (hermes, qwen3_coder) if isinstance(w, str)))

    def extract(self, shape: Shape) -> Callable[[str], object] | None:
        """The ``extract_tool_calls`` of vLLM's parser for the shape, given its tools."""
        if shape.vllm == "hermes" and self.hermes is not None:
            hermes = self.hermes(tokenizer=object())
            return lambda text: hermes.extract_tool_calls(text, None)
        if shape.vllm == "qwen3_coder" and self.qwen3_coder is not None:
            qwen3_coder = self.qwen3_coder(Tokenizer(), _vllm_tools(shape.tools))
            return lambda text: qwen3_coder.extract_tool_calls(text, None)
        return None


# -- the report ---------------------------------------------------------------------------


def finished_table(vllm: Vllm) -> list[str]:
    """The finished parse of one call at each size: the fast path where it applies, the
    replay through the stream parser (what every call paid before it), the references."""
    lines = [
        "",
        f"| finished call | parse_tool_calls | the replay | json.loads of the arguments | "
        f"ratio | orjson.loads | {vllm.label} extract_tool_calls | ours / vLLM |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in SIZES:
        # Each sample runs the parse often enough to last about a millisecond.
        times = max(1, 256_000 // size)
        for shape in SHAPES:
            if not shape.call:
                continue
            text = shape.text(size)
            arguments = shape.arguments_json(size)
            tools = shape.tools
            works: list[Callable[[], object]] = [
                lambda: parse_tool_calls(text, tools),  # noqa: B023  (used in this iteration)
                lambda: replay_output(text, tools),  # noqa: B023
                lambda: json.loads(arguments),  # noqa: B023
                lambda: orjson.loads(arguments),  # noqa: B023
            ]
            extract = vllm.extract(shape)
            if extract is not None:
                works.append(lambda: extract(text))  # type: ignore[misc]  # noqa: B023
            parse, replay, loads, fast, *spent = interleaved(works, times)
            theirs = against = "—"
            if spent:
                theirs, against = f"{spent[0] * 1e6:.0f} µs", f"{parse / spent[0]:.2f}×"
            lines.append(
                f"| {shape.label}, {size // 1000}k | {parse * 1e6:.0f} µs | {replay * 1e6:.0f} µs "
                f"| {loads * 1e6:.0f} µs | {parse / loads:.1f}× | {fast * 1e6:.0f} µs | {theirs} "
                f"| {against} |"
            )
    return lines


def main() -> str:
    vllm = Vllm()
    vllm_label = f"{vllm.label} Hermes"
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
            total = stream_time(chunks, lambda: StreamParser(shape.tools))  # noqa: B023
            totals.append(total)
            per.append(total / len(chunks) * 1e6)
        chunks = deltas(shape.text(large))
        floor = stream_time(chunks, _Floor) / len(chunks) * 1e6
        theirs = ["—", "—"]
        hermes = vllm.hermes
        if hermes is not None and shape.vllm == "hermes":
            for i, size in enumerate(SIZES):
                their_chunks = deltas(shape.text(size))
                spent = stream_time(
                    their_chunks, lambda h=hermes: VllmStream(h), VLLM_STREAM_REPEATS
                )
                theirs[i] = f"{spent / len(their_chunks) * 1e6:.1f} µs"
        worst = max(worst, *per)
        worst_ratio = max(worst_ratio, totals[1] / totals[0])
        lines.append(
            f"| {shape.label} | {per[0]:.2f} µs | {per[1]:.2f} µs | {totals[1] / totals[0]:.1f}× "
            f"| {floor:.3f} µs | {theirs[0]} | {theirs[1]} |"
        )
    lines += finished_table(vllm)
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
    lines += [f"Not measured: {why}.\n" for why in vllm.missing]
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
        "is then taken as it is (`toolrelay.finished`), and one clean Qwen3-Coder block read "
        "tag by tag (`toolrelay.finished_xml`), anything else replayed through "
        "the same state machine as a stream (the replay column). `auto` looks at `{` and `[` "
        "(bare JSON calls, Python "
        "call lists) where a pinned Hermes does not; a bracket no format could claim is "
        "passed over inside the marker search's regular expression, and markup-dense code "
        "pays for the larger pattern. vLLM's Hermes streaming parser reads the whole text "
        "again at every delta: its cost per delta grows with the text. vLLM's `qwen3_coder` "
        "parser feeds a finished text through its streaming engine, which at each tag "
        "converts the parameters so far to JSON again (regular expressions) and walks that "
        "JSON character by character in Python for the part that is safe to send.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--finished" in sys.argv:  # the finished table alone: a short run
        loaded = Vllm()
        print("\n".join([*finished_table(loaded), *loaded.missing]))
        raise SystemExit(0)
    report = main()
    print(report)
    if "--write" in sys.argv:
        write_section("## Parser", report)
