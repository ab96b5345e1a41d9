"""How much a loop-detector check costs on a long, realistic agent transcript.

The transcript is one user turn of an agent fixing a bug: ~200 messages of
file reads, greps, shell commands with timestamped output, edits and test
runs, a few of them parallel. Three figures per entry point:

- warm: the same transcript checked again (the agent loop re-checks the whole
  history every round, so unchanged messages have been seen before);
- per round: the loop as it really runs, one round appended, then checked;
- cold: every memo cleared before each check (the worst case).

Run: ``.venv/bin/python bench/stuck_bench.py [--write]``; ``--write`` puts the
figures into bench/RESULTS.md under "## Stuck detector".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from results import write_section

from toolrelay.stuck import StuckDetector, clear_caches, gateway_verdict

HEADING = "## Stuck detector"


def source_file(n: int) -> str:
    lines = [f"def handler_{n}_{i}(request, retries={i}):" for i in range(12)]
    body = [f"    value_{i} = request.get('field_{i}') or compute({i}, retries)" for i in range(50)]
    return "\n".join(lines[:1] + body + lines[1:]) + "\n"


def shell_output(n: int) -> str:
    stamp = f"2026-11-29T10:{n % 60:02d}:{(n * 7) % 60:02d}Z"
    rows = [f"{stamp} worker pid {4000 + n} step {i} ok in {n % 9}.{i}s" for i in range(10)]
    return "\n".join(rows)


def test_output(n: int) -> str:
    failures = max(0, 5 - n // 20)
    return (
        "============================= test session starts ==============================\n"
        + "".join(f"tests/test_mod{i}.py ....F.. [{i * 10}%]\n" for i in range(8))
        + f"=========================== {failures} failed, 120 passed in 3.{n}s ===========\n"
    )


def agent_transcript(rounds: int) -> list[dict[str, Any]]:
    """One user turn with ``rounds`` tool rounds: 2 + 2*rounds messages or so."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": "The handler tests fail; find the bug and fix it."},
    ]
    for n in range(rounds):
        kind = n % 6
        if kind == 0:
            calls = [("read_file", {"path": f"src/mod{n % 13}.py"}, source_file(n))]
        elif kind == 1:
            calls = [("grep", {"pattern": f"field_{n}", "path": "src"}, f"src/mod{n}.py:{n}: x")]
        elif kind == 2:
            calls = [("shell", {"command": f"python -m tool --step {n}"}, shell_output(n))]
        elif kind == 3:
            calls = [
                ("edit", {"path": f"src/mod{n}.py", "old": f"a{n}", "new": f"b{n}"}, "ok"),
                ("read_file", {"path": f"src/mod{n}.py", "limit": 40}, source_file(n + 1)),
            ]
        elif kind == 4:
            calls = [("run_tests", {"path": "tests", "verbose": True}, test_output(n))]
        else:
            calls = [("shell", {"command": "git diff --stat"}, f"{n} files changed")]
        tool_calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args, _) in enumerate(calls)
        ]
        messages.append(
            {"role": "assistant", "content": f"Step {n}: checking.", "tool_calls": tool_calls}
        )
        for call, (_, _, result) in zip(tool_calls, calls, strict=True):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return messages


def timings_us(check: Callable[[], object], runs: int, cold: bool = False) -> list[float]:
    samples = []
    for _ in range(runs):
        if cold:
            clear_caches()
        start = time.perf_counter_ns()
        check()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


Check = Callable[[list[dict[str, Any]], dict[str, Any]], object]


def per_round_us(messages: list[dict[str, Any]], check: Check) -> float:
    """Median cost of a check as the loop makes it: once per round, history growing.

    ``check`` gets the history up to the end of a round and the assistant
    message that comes next.
    """
    clear_caches()
    samples = []
    for end in range(1, len(messages)):
        ends_round = messages[end - 1]["role"] == "tool" and messages[end]["role"] == "assistant"
        if not ends_round:
            continue
        prefix, following = messages[:end], messages[end]
        start = time.perf_counter_ns()
        check(prefix, following)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


Row = tuple[str, float, float, float, float]


def long_history_us() -> tuple[int, float]:
    """check_round on a ten times longer turn: the 50-call window bounds the cost."""
    messages = agent_transcript(900)
    detector = StuckDetector()
    samples = timings_us(lambda: detector.check_round(messages), 1000)
    return len(messages), statistics.median(samples)


def fresh_request_us() -> float:
    """gateway_verdict on a freshly decoded body each time, as the gateway sees one.

    Every string is a new object, so each content is hashed again (its memo
    entries still match by value).
    """
    messages = agent_transcript(90)
    encoded = orjson.dumps(messages)
    bodies = [orjson.loads(encoded) for _ in range(200)]
    gateway_verdict(bodies[0])
    samples = []
    for body in bodies:
        start = time.perf_counter_ns()
        gateway_verdict(body)
        samples.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(samples)


def measure() -> tuple[int, list[Row]]:
    messages = agent_transcript(90)
    detector = StuckDetector()
    pending = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "next",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/mod1.py"}'},
            }
        ],
    }
    checks: list[tuple[str, Check]] = [
        ("check_round", lambda history, _: detector.check_round(history)),
        ("check_pending", detector.check_pending),
        ("gateway_verdict", lambda history, _: gateway_verdict(history)),
    ]
    rows = []
    for name, check in checks:
        whole = functools.partial(check, messages, pending)
        warm = timings_us(whole, 1000)
        cold = statistics.median(timings_us(whole, 200, cold=True))
        per_round = per_round_us(messages, check)
        rows.append((name, statistics.median(warm), min(warm), per_round, cold))
    return len(messages), rows


def report(count: int, rows: list[Row], long_history: tuple[int, float], fresh: float) -> str:
    lines = [
        HEADING,
        "",
        f"`bench/stuck_bench.py`: one user turn of {count} messages (90 tool rounds of",
        "reads, greps, timestamped shell output, edits with parallel reads, test runs);",
        "the window is the last 50 tool calls. Median µs per check,",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs,",
        f"load average {os.getloadavg()[0]:.1f} while measuring (the machine is shared).",
        "",
        "| check | warm (same transcript) | fastest warm run | per round | cold (memos cleared) |",
        "|---|---|---|---|---|",
    ]
    for name, warm, fastest, per_round, cold in rows:
        lines.append(
            f"| `{name}` | {warm:.0f} µs | {fastest:.0f} µs | {per_round:.0f} µs | {cold:.0f} µs |"
        )
    long_count, long_warm = long_history
    lines += [
        "",
        f"On a {long_count}-message turn `check_round` takes {long_warm:.0f} µs (warm): only",
        "the last 50 tool calls are read, so the cost does not grow with the history.",
        "`gateway_verdict` on a freshly decoded request body (new string objects, as",
        f"the gateway gets them): {fresh:.0f} µs.",
        "",
        '"Per round" makes the check after each of the 90 rounds in turn, as the',
        "agent loop (or a client resending its history) does, with the memos",
        'starting empty: only that round\'s calls and results are new. "Cold"',
        "re-parses, re-masks and re-hashes all 50 calls and results on every check.",
        "On this shared machine repeated runs differ by up to 2x, the cold column most;",
        "the fastest warm run shows the cost when the detector has a core to itself.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args(argv)
    count, rows = measure()
    section = report(count, rows, long_history_us(), fresh_request_us())
    print(section)
    if args.write:
        write_section(HEADING, section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
