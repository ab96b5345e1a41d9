"""The long fuzz run of the surfaces added last (issue 23): tool definitions,
tool responses and /ws frames, drawn by hypothesis against a real gateway,
simulator and tool server on 127.0.0.1 (tests/engine/surfaces.py holds the
strategies and the checks; the suite runs 40 of each in
tests/engine/test_fuzz_surfaces.py).

Every drawn input is tried; none stops the run. A defect is an input the
gateway did not hold against: an answer outside the documented ones, a later
request it no longer served, a credential shown, an exception, an unbounded
result. The figures (tries, clean, defects) go to stdout and, with
``--write``, into bench/RESULTS.md ("Hardening: the newer surfaces").

Run: ``.venv/bin/python bench/fuzz_surfaces.py --examples 500`` (a few minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.results import write_section  # noqa: E402
from tests.engine.surfaces import (  # noqa: E402
    DEFINITION_BODIES,
    TOOL_ANSWERS,
    WS_FRAMES,
    Responder,
    check_definitions,
    check_tool_answer,
    check_ws_frame,
)
from tests.gateway.support import gateway  # noqa: E402
from toolrelay.simulator import Simulator, SimulatorConfig  # noqa: E402


def run(
    strategy: st.SearchStrategy[Any], check: Callable[[Any], str | None], examples: int
) -> tuple[int, int, list[str]]:
    """(tries, clean, defects) of ``check`` over ``examples`` drawn inputs."""
    tries = 0
    defects: list[str] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def each(value: Any) -> None:
        nonlocal tries
        tries += 1
        found = check(value)
        if found is not None:
            defects.append(f"{found} (input: {value!r:.200})")

    each()
    return tries, tries - len(defects), defects


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=500, help="inputs per surface")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    started = time.monotonic()
    with (
        Simulator(SimulatorConfig.load(None)) as sim,
        gateway(sim.openai_url, max_body_bytes=64 * 1024) as gw,
        Responder() as responder,
    ):
        surfaces = [
            ("tool definitions (`POST /api/tools`)", DEFINITION_BODIES,
             lambda body: check_definitions(gw.url, body)),
            ("tool responses (status, headers, body)", TOOL_ANSWERS,
             lambda answer: check_tool_answer(responder, answer, False)
             or check_tool_answer(responder, answer, True)),
            ("`/ws` frames", WS_FRAMES, lambda frame: check_ws_frame(gw.url, frame)),
        ]  # fmt: skip
        for name, strategy, check in surfaces:
            tries, clean, defects = run(strategy, check, args.examples)
            rows.append((name, tries, clean, len(defects)))
            for defect in defects[:20]:
                print(f"DEFECT {name}: {defect}", file=sys.stderr)
    minutes = (time.monotonic() - started) / 60
    table = "\n".join(f"| {n} | {t:,} | {c:,} | {d} |" for n, t, c, d in rows)
    summary = (
        "## Hardening: the newer surfaces\n\n"
        f"`bench/fuzz_surfaces.py --examples {args.examples}` on {time.strftime('%Y-%m-%d')}, "
        f"{minutes:.1f} minutes: hypothesis-drawn hostile input against a real gateway, "
        "simulator and tool server (tests/engine/surfaces.py). Clean: a documented answer "
        "(200, 400 or 413 with `ok`; a bounded text result; an `error` event or a whole turn) "
        "and every later request still served (`GET /api/tools`, a chat request and a stream, "
        "the same `/ws` session), no credential shown. MCP results are not in this run yet "
        "(their source lands separately).\n\n"
        "| surface | tries | clean | defects |\n|---|---:|---:|---:|\n" + table + "\n"
    )
    print(summary)
    if args.write:
        write_section("## Hardening: the newer surfaces", summary)
    return 0 if all(row[3] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
