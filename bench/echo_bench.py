"""What the echo filter costs a rescue round: the same answer read with the filter
(the rescue prompt's texts given, as the gateway does on the rescue path) and
without it (no texts: the plain answer), side by side in one run.

In process, no I/O, the gateway's own functions:

* finished: ``parse_output`` then ``remove_echoes`` (what ``read_answer`` does
  to a rescue answer) against ``parse_output`` alone;
* streamed: the stream parser fed 4-character chunks, its events through an
  ``EchoCleaner`` (what a rescue stream does), against the stream parser alone.

Answers of about 1 KB and 6 KB: ordinary prose that uses the prompt's words
(call, tool, block, value, result: the costly case, the filter cannot let a
sentence go at its first word), and the same prose with a reworded directive
in every paragraph (what a weak model writes). Each figure is the median of
``RUNS`` runs; filtered and plain alternate inside a run, so load affects both.

Usage::

    .venv/bin/python bench/echo_bench.py [--write]   # --write updates bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from results import write_section

from toolrelay.correction import CORRECTION_HEADER, CORRECTION_TAIL
from toolrelay.echo import EchoCleaner, remove_echoes
from toolrelay.parse import parse_output
from toolrelay.rescue import directive, render_tools_prompt
from toolrelay.simulator.reword import reworded
from toolrelay.types import tool_specs
from toolrelay.undecided import stream_parser

HEADING = "## Echo filter on rescue rounds (issue 24)"
RUNS = 7
CHUNK = 4

TOOLS = tool_specs(
    [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "The city's name"}},
                    "required": ["city"],
                },
            },
        }
        for name, description in (
            ("get_weather", "Get the current weather for a city."),
            ("get_time", "Get the current local time in a city."),
        )
    ]
)
# What the gateway gives the filter on a rescue round (``injected_texts``).
INJECTED = (
    render_tools_prompt(TOOLS),
    directive(TOOLS, "auto", strength="normal"),
    directive(TOOLS, "auto", strength="strict"),
    CORRECTION_HEADER,
    CORRECTION_TAIL,
)
# A model's own answer, using the words of the prompt as prose does.
PARAGRAPH = (
    "The weather service I looked at gives each city its own block of results. "
    "For Paris the value for today is mild, with a light wind from the west and "
    "some cloud in the afternoon. If you want the time there as well, the result "
    "comes from the same place, one call per city.\n"
    "Tokyo is warmer: the last reading said 24 degrees and clear skies. A tool "
    "like this one is handy when you plan a trip, but the numbers change every "
    "hour, so check again before you leave.\n\n"
)


def answer(size: int, *, echoed: bool) -> str:
    """About ``size`` characters of prose; ``echoed``: a reworded directive in each paragraph."""
    paragraph = PARAGRAPH
    if echoed:
        paragraph = PARAGRAPH + reworded(INJECTED[1]) + "\n\n"
    return (paragraph * (size // len(paragraph) + 1))[:size]


def finished_plain(text: str) -> None:
    parse_output(text, TOOLS, "auto")


def finished_filtered(text: str) -> None:
    parsed, _ = parse_output(text, TOOLS, "auto")
    remove_echoes(parsed.content, INJECTED)


def streamed_plain(text: str) -> None:
    parser = stream_parser(TOOLS, "auto", reasoning_open=None)
    for at in range(0, len(text), CHUNK):
        parser.feed(text[at : at + CHUNK])
    parser.close()


def streamed_filtered(text: str) -> None:
    parser = stream_parser(TOOLS, "auto", reasoning_open=None)
    cleaner = EchoCleaner(INJECTED, TOOLS)
    for at in range(0, len(text), CHUNK):
        cleaner.feed(parser.feed(text[at : at + CHUNK]))
    cleaner.feed(parser.close())
    cleaner.close()


def timed(work: Callable[[str], None], text: str, repeat: int) -> float:
    """CPU seconds per call, over ``repeat`` calls (CPU time: the machine is shared)."""
    started = time.process_time()
    for _ in range(repeat):
        work(text)
    return (time.process_time() - started) / repeat


def measure(
    plain: Callable[[str], None], filtered: Callable[[str], None], text: str
) -> tuple[float, float, float]:
    """Median seconds plain, filtered, and the median of the runs' ratios."""
    repeat = max(3, 30_000 // len(text))
    plain(text), filtered(text)  # caches (the prompt's sentences) filled, as in a server
    pairs = [(timed(plain, text, repeat), timed(filtered, text, repeat)) for _ in range(RUNS)]
    return (
        statistics.median(p for p, _ in pairs),
        statistics.median(f for _, f in pairs),
        statistics.median(f / p for p, f in pairs),
    )


def kept(text: str) -> bool:
    """Whether the filter leaves ordinary prose whole (the bench's own check)."""
    return remove_echoes(text, INJECTED) == text


def run() -> str:
    lines = [
        "| answer | size | finished: plain | finished: filtered | ratio "
        "| streamed: plain | streamed: filtered | ratio | per chunk added |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for echoed in (False, True):
        for size in (1024, 6144):
            text = answer(size, echoed=echoed)
            if not echoed and not kept(text):
                raise SystemExit("the filter removed ordinary prose: fix that first")
            fp, ff, fr = measure(finished_plain, finished_filtered, text)
            sp, sf, sr = measure(streamed_plain, streamed_filtered, text)
            chunks = -(-len(text) // CHUNK)
            lines.append(
                f"| {'prose + reworded directive' if echoed else 'prose'} | {size // 1024} KB "
                f"| {fp * 1e3:.2f} ms | {ff * 1e3:.2f} ms | {fr:.2f}x "
                f"| {sp * 1e3:.2f} ms | {sf * 1e3:.2f} ms | {sr:.2f}x "
                f"| {(sf - sp) / chunks * 1e6:.1f} µs |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    table = run()
    text = f"""{HEADING}

`bench/echo_bench.py`: a rescue round's answer read with the echo filter (the
rescue prompt's texts given, as on the gateway's rescue path: exact echoes, then
reworded lines and sentences) and without it, in process, CPU time, median of {RUNS} runs,
filtered and plain alternating; streamed in {CHUNK}-character chunks through the
stream parser and an `EchoCleaner`. Two tools; the prose uses the prompt's words
(call, tool, block, value, result). {platform.machine()}, {os.cpu_count()} cores,
Python {platform.python_version()}, load average {load:.1f}.

{table}
"""
    print(text)
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
