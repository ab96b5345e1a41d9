"""Adversarial scaling: every hostile input family doubled from 8k to 256k characters.

A parser that is linear takes twice as long for twice the text; one that
rescans takes four times as long. Each family (issue 17's list, nesting, long
numbers and words, a seeded markup soup; with ``--markers`` also every marker
the parser knows, repeated, then blanks, then a word) is parsed finished and
streamed in deltas of 1 and 7 characters, at 8k, 16k, ..., 256k characters,
and the ratio of each doubling is reported (goal: ≤ 2.3 everywhere). Times are the best of a few
runs; a shared machine only ever adds time.

Run: ``.venv/bin/python bench/scaling_bench.py [--write] [--only SUBSTRING] [--markers]``
(``--write`` replaces bench/RESULTS.md's "Parser scaling" section).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from results import write_section  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))
from soup import PIECES  # type: ignore[import-not-found]

from toolrelay import StreamParser, parse_tool_calls
from toolrelay.formats import opener_table

SIZES = (8_000, 16_000, 32_000, 64_000, 128_000, 256_000)
MODES = (0, 1, 7)  # 0: finished (parse_tool_calls); n: streamed n characters at a time
GOAL = 2.3
CAP = 20.0  # seconds: a family slower than this at one size is not run larger
RUNS = 3

Family = Callable[[int], str]


def repeat(unit: str) -> Family:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def prefixed(prefix: str, unit: str, suffix: str = "") -> Family:
    return lambda size: prefix + repeat(unit)(size) + suffix


def soup(seed: int) -> Family:
    """Markup soup: the fuzz vocabulary (tests/core/soup.py) drawn evenly, so that
    every stretch of the text is alike and the sizes compare (no long runs)."""

    def make(size: int) -> str:
        rng = random.Random(seed)
        out: list[str] = []
        length = 0
        while length < size:
            piece = rng.choice(PIECES)
            out.append(piece)
            length += len(piece)
        return "".join(out)[:size]

    return make


def families() -> dict[str, Family]:
    call = '<tool_call>{"name": "f", "arguments": {"a": '
    found: dict[str, Family] = {
        # Issue 17's list.
        "<think> repeated, unclosed": repeat("<think>"),
        "<seed:think> repeated, unclosed": repeat("<seed:think>"),
        "<|START_THINKING|> repeated, unclosed": repeat("<|START_THINKING|>"),
        "every reasoning opener, unclosed": repeat(
            "<think><seed:think><|START_THINKING|><|inner_prefix|>"
        ),
        "unclosed <think> around calls": repeat('<think><tool_call>{"name": "f"'),
        "objects nested in arguments": prefixed(call, '{"a": '),
        "arrays nested in arguments": prefixed(call, "["),
        "an integer in arguments": prefixed(call, "7", "}}</tool_call>"),
        "digits then a letter in arguments": lambda n: prefixed(call, "1")(n) + "a}}",
        "'{\"name\":' repeated": repeat('{"name":'),
        "a bare word in arguments": prefixed(call, "x", "}}</tool_call>"),
        "<|channel|> repeated": repeat("<|channel|>"),
        "<|start|>assistant repeated": repeat("<|start|>assistant"),
        "DeepSeek openers repeated": repeat("<｜tool▁calls▁begin｜>"),
        "DeepSeek calls opened, never closed": prefixed(
            "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{"
        ),
        # Strings and escapes.
        "quotes in arguments": prefixed(call, '"'),
        "backslashes in a string": prefixed(call + '"', "\\\\"),
        "escapes in a string": prefixed(call + '"', 'a\\n\\"\\t\\u00e9'),
        "lone surrogate escapes": prefixed(call + '"', "\\ud800"),
        "a string never closed, bare in prose": prefixed(
            'Note {"name": "f", "arguments": {"a": "', "x"
        ),
        "a call object never closed, bare": prefixed('{"name": "f", "arguments": ', '{"a": '),
        "small objects in a list never closed": prefixed(
            '<tool_call>{"name": "f", "arguments": {"xs": [', '{"a": 1, "b": [2]}, '
        ),
        "'{\"arguments\": {' repeated": repeat('{"arguments": {'),
        "a wrapper nested": repeat('{"function": '),
        "a wrapper list nested": repeat('{"tool_calls": ['),
        "leaked tags in arguments": prefixed(call, "<x>"),
        "long blanks in arguments": prefixed(call, " ", "1}}"),
        # Other engines.
        "pythonic calls opened": repeat("[f("),
        "pythonic value nested": prefixed("[f(a=", "["),
        "pythonic strings": prefixed("[f(a='", "x"),
        "XML parameters opened": prefixed("<tool_call>\n<function=f>\n", "<parameter=a>"),
        "XML value": prefixed("<tool_call>\n<function=f>\n<parameter=a>\n", "x <y> "),
        "XML tags never closed": repeat("<function=f"),
        "Harmony headers": repeat("<|channel|>commentary to=functions.f "),
        "code with brackets and tags": repeat(
            'function f(x) { if (x) { return {a: [1, 2], b: "{c}"}; } } // [note] <b>\n'
        ),
        "markup soup (seed 1)": soup(1),
        "markup soup (seed 2)": soup(2),
    }
    return found


def marker_families() -> dict[str, Family]:
    """Each marker the parser knows: repeated, then blanks, then a word."""
    found: dict[str, Family] = {}
    for marker in sorted(opener_table("auto").openers):
        found[f"{marker!r} repeated"] = repeat(marker)
        found[f"{marker!r} then blanks"] = prefixed(marker, " ")
        found[f"{marker!r} then a word"] = prefixed(marker, "a")
    return found


def run(text: str, mode: int, repeats: int = 1) -> float:
    """CPU seconds of one parse: on a shared machine, waiting for a core is not the parser's."""
    gc.collect()
    start = time.process_time()
    for _ in range(repeats):
        if mode == 0:
            parse_tool_calls(text)
        else:
            parser = StreamParser()
            feed = parser.feed
            for at in range(0, len(text), mode):
                feed(text[at : at + mode])
            parser.close()
    return (time.process_time() - start) / repeats


def measure(family: Family, mode: int) -> tuple[list[float], list[float]]:
    """The best of RUNS runs at each size, the sizes taken in turn so that they share conditions."""
    texts = [family(size) for size in SIZES]
    times = [float("inf")] * len(SIZES)
    # A run too short for the clock is repeated within one measurement.
    repeats = max(1, int(0.01 / max(run(texts[0], mode), 1e-6)))
    for _ in range(RUNS):
        for i, text in enumerate(texts):
            if i and times[i - 1] > CAP:
                break
            times[i] = min(times[i], run(text, mode, max(1, repeats >> i)))
    times = [t for t in times if t != float("inf")]
    ratios = [b / a for a, b in itertools.pairwise(times) if a > 0]
    return times, ratios


def main() -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--markers", action="store_true", help="also each marker's own families (about 40 min)"
    )
    args = parser.parse_args()
    markers = marker_families() if args.markers else {}
    chosen = {k: v for k, v in (families() | markers).items() if args.only in k}
    one_marker = len(chosen.keys() & markers.keys())
    rows = []
    worst = (0.0, "")
    marker_worst = (0.0, "")
    overall = (0.0, "")  # 256k against 8k: 32 is linear
    slowest = 0.0
    for name, family in chosen.items():
        cells = []
        for mode in MODES:
            times, ratios = measure(family, mode)
            label = "finished" if mode == 0 else f"{mode}-char deltas"
            top = max(ratios) if ratios else float("inf")
            worst = max(worst, (top, f"{name}, {label}"))
            if name in markers:
                marker_worst = max(marker_worst, (top, f"{name}, {label}"))
            slowest = max(slowest, times[-1])
            if len(times) == len(SIZES):
                overall = max(overall, (times[-1] / times[0], f"{name}, {label}"))
            # Ratios at 16k … 256k against the size before; '—' beyond a size over CAP.
            cells.append(" ".join(f"{r:.2f}" for r in ratios) or "—")
            cells.append(f"{times[-1] * 1e3:.0f}" if len(times) == len(SIZES) else "—")
        row = f"| {name} | " + " | ".join(cells) + " |"
        print(row, file=sys.stderr, flush=True)
        if name not in markers:
            rows.append(row)
    header = [
        "## Parser scaling",
        "",
        f"Measured by `bench/scaling_bench.py` on {time.strftime('%Y-%m-%d')}, "
        f"Python {sys.version.split()[0]}: {len(chosen)} hostile input families, each "
        "parsed finished and streamed in 1- and 7-character deltas at 8k, 16k, …, 256k "
        "characters in one run; the CPU time of each doubling over the one before (best of "
        f"{RUNS} runs, the sizes in turn). Linear is 2.0; the goal is ≤ {GOAL} everywhere.",
        "",
        f"Worst ratio of any doubling: **{worst[0]:.2f}** ({worst[1]}); "
        f"256k against 8k: at most **{overall[0]:.1f}** ({overall[1]}; 32 is linear); "
        f"slowest 256k parse: {slowest * 1e3:.0f} ms."
        + (
            f" The {one_marker} families made of one marker (each marker the parser knows, "
            f"repeated, then blanks, then a word): worst ratio {marker_worst[0]:.2f} "
            f"({marker_worst[1]}); their rows are left out."
            if one_marker
            else " (`--markers` adds each marker's own families.)"
        ),
        "",
        "| family | finished: ratios 16k…256k | 256k ms | 1-char deltas: ratios | 256k ms "
        "| 7-char deltas: ratios | 256k ms |",
        "|---|---|---:|---|---:|---|---:|",
    ]
    return "\n".join(header + rows) + "\n"


if __name__ == "__main__":
    report = main()
    print(report)
    if "--write" in sys.argv:
        write_section("## Parser scaling", report)
