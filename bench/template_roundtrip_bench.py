"""The long chat-template round trip: every vendored template, many generated turns.

The property of tests/core/test_template_roundtrip.py (a family's real chat
template renders generated tool calls; the parser reads back the same calls,
no markup in content, finished and streamed one character at a time and in
random chunks), run with more examples per template, with and without thinking,
and with hypothesis shrinking a failure to its smallest case. ``scripts/test``
runs a few derandomized examples of the same property.

Run: ``.venv/bin/python bench/template_roundtrip_bench.py --examples 200``
(``--write`` puts the summary into bench/RESULTS.md, "Template round trip").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from results import write_section  # type: ignore[import-not-found]
from templates import SPECS, Spec  # type: ignore[import-not-found]
from test_template_roundtrip import (  # type: ignore[import-not-found]
    CONTENT,
    REASONING,
    allowed,
    calls_for,
    round_trip,
)


def run(spec: Spec, examples: int, thinking: bool) -> tuple[int, str | None]:
    """Examples tried, and the first failure (shrunk), if any."""
    tried = 0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        calls=calls_for(spec.single),
        prose=REASONING if thinking else CONTENT,
        seed=st.integers(0, 2**16),
    )
    def prop(calls: list[tuple[str, dict[str, Any]]], prose: str, seed: int) -> None:
        nonlocal tried
        if not allowed(spec, calls):
            return
        tried += 1
        if thinking:
            round_trip(spec, calls, "", prose, True, seed)
        else:
            round_trip(spec, calls, prose, None, False, seed)

    try:
        prop()
    except AssertionError as failure:
        return tried, str(failure).splitlines()[0][:300]
    return tried, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="per template and mode")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    rows = []
    failures = []
    started = time.perf_counter()
    for spec in SPECS:
        for thinking in (False, True):
            begun = time.perf_counter()
            tried, failure = run(spec, args.examples, thinking)
            mode = "thinking" if thinking else "plain"
            rows.append((spec.file, mode, tried, time.perf_counter() - begun, failure))
            print(f"{spec.file:55} {mode:8} {tried:5} {'FAIL ' + failure if failure else 'ok'}")
            if failure:
                failures.append((spec.file, mode, failure))
    total = time.perf_counter() - started
    tried_all = sum(row[2] for row in rows)
    print(f"{len(SPECS)} templates, {tried_all} turns, {len(failures)} failing, {total:.0f} s")
    if args.write:
        lines = [
            "## Template round trip",
            "",
            f"`bench/template_roundtrip_bench.py --examples {args.examples}`: {len(SPECS)} "
            f"vendored chat templates, each with thinking off and on; {tried_all} generated "
            f"turns rendered and read back (finished, one character at a time, random "
            f"chunks) in {total:.0f} s; {len(failures)} template/mode pairs failing.",
            "",
        ]
        lines += [f"- {file} ({mode}): {failure}" for file, mode, failure in failures]
        limits = sorted({(s.file, limit.reason) for s in SPECS for limit in s.limits})
        lines += ["", "Limits (cases the generator leaves out, each proved by a test):", ""]
        lines += [f"- {file}: {reason}" for file, reason in limits]
        write_section("## Template round trip", "\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
