"""The long parser fuzz run: markup soup through parse_tool_calls and StreamParser.

Each input (``tests/core/soup.py``: every marker, nested openers, deep nesting,
huge numbers, escapes, fragments of calls) is parsed whole and streamed at a
random chunking (twice: told whether the text starts inside reasoning, and not
told, as the gateway's first streams of a model are not), in worker
processes, each input under a time budget. An
input fails if the parser raises, runs over the budget, or streams other
events than it parses (``tests/core/streamcheck.py``). Failures are written
to a file for a regression test; the summary goes to stdout and, with
``--write``, into bench/RESULTS.md ("Parser fuzz").

Run: ``.venv/bin/python bench/fuzz_parser.py --inputs 100000`` (2 to 5 minutes
on two cores). CI runs fixed seeds of the same soup (tests/core/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "core"))

from results import write_section  # type: ignore[import-not-found]
from soup import TOOLS, cuts, soup  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]


class _OverBudget(Exception):
    pass


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _OverBudget


def _one(args: tuple[int, int, float]) -> tuple[str, int, str]:
    """One input: ("ok" | "crash" | "timeout" | "mismatch", its seed, a detail)."""
    seed, size, budget = args
    rng = random.Random(seed)
    text = soup(rng, rng.randint(1, size))
    tools = TOOLS if rng.random() < 0.5 else None
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        chunking = cuts(rng, len(text))
        check_stream(text, chunking, tools)
        # As the gateway streams a model whose reasoning flag it does not know yet.
        check_stream(text, chunking, tools, told=False)
    except _OverBudget:
        return "timeout", seed, f"{len(text)} characters"
    except AssertionError:
        return "mismatch", seed, traceback.format_exc(limit=3)
    except Exception:
        return "crash", seed, traceback.format_exc(limit=5)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return "ok", seed, ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", type=int, default=3000, help="longest input, in characters")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds per input")
    parser.add_argument("--workers", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--failures", default="fuzz-failures.txt")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    jobs = [(args.seed * 10_000_000 + i, args.size, args.budget) for i in range(args.inputs)]
    counts = {"ok": 0, "crash": 0, "timeout": 0, "mismatch": 0}
    failures: list[str] = []
    started = time.monotonic()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for done, (verdict, seed, detail) in enumerate(pool.imap_unordered(_one, jobs, 64), 1):
            counts[verdict] += 1
            if verdict != "ok":
                failures.append(f"== {verdict} seed={seed}\n{detail}\n")
            if done % 10_000 == 0:
                print(f"{done} inputs: {counts}", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    if failures:
        Path(args.failures).write_text("".join(failures), encoding="utf-8")
    summary = (
        "## Parser fuzz\n\n"
        f"`bench/fuzz_parser.py --inputs {args.inputs} --seed {args.seed}` on "
        f"{time.strftime('%Y-%m-%d')}: {args.inputs:,} markup-soup texts of up to "
        f"{args.size:,} characters, each parsed whole and streamed at a random chunking "
        "(told the reasoning flag, and not told), "
        f"in {elapsed / 60:.1f} minutes on {args.workers} processes "
        f"({args.budget:g} s budget each): crashes **{counts['crash']}**, over the budget "
        f"**{counts['timeout']}**, streamed ≠ finished **{counts['mismatch']}**.\n"
    )
    print(summary)
    if args.write:
        write_section("## Parser fuzz", summary)
    return 0 if len(failures) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
