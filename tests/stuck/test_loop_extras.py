"""The agent loop's two extras: the per-turn poll cap and the rewind action."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from toolrelay.stuck import StuckConfig, StuckDetector, rewind

TOOLS = [
    {"type": "function", "function": {"name": "job_status", "parameters": {}}},
    {"type": "function", "function": {"name": "read", "parameters": {}}},
]


def call(n: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def polls(count: int) -> list[dict[str, Any]]:
    """A turn of ``count`` status polls that keep making progress."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "wait for job 1"}]
    for n in range(count):
        messages.append({"role": "assistant", "tool_calls": [call(n, "job_status", {"id": 1})]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"running {n}%"})
    return messages


def pending(name: str = "job_status", n: int = 999) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [call(n, name, {"id": 1})]}


def test_polls_that_make_progress_run_up_to_the_cap_counting_the_whole_turn() -> None:
    detector = StuckDetector(StuckConfig(max_poll_calls=100))
    # 99 polls: far beyond the 50-call window, and the 100th may still run.
    assert detector.check_pending(polls(99), pending(), TOOLS).per_call == {"c999": "run"}
    decision = detector.check_pending(polls(100), pending(), TOOLS)
    assert decision.halt
    assert decision.per_call == {"c999": "block"}
    verdict = decision.verdict
    assert verdict is not None
    assert (verdict.pattern, verdict.count, verdict.thresholds.halt_at) == ("poll_budget", 101, 100)
    assert verdict.polling
    assert decision.blocked_texts["c999"].startswith(
        "[loop-guard:blocked poll_budget] NOT EXECUTED: job_status"
    )
    assert verdict.message_to_model.startswith("[loop-guard:halt poll_budget]")


def test_a_new_user_message_starts_a_new_budget_and_other_calls_are_not_counted() -> None:
    detector = StuckDetector(StuckConfig(max_poll_calls=3))
    messages = [*polls(3), {"role": "assistant", "content": "still running"}]
    messages.append({"role": "user", "content": "and now?"})
    assert not detector.check_pending(messages, pending(), TOOLS).halt
    assert not detector.check_pending(polls(3), pending("read"), TOOLS).halt


@pytest.mark.parametrize(
    ("config", "halts"),
    [
        (StuckConfig(max_poll_calls=None), False),
        (StuckConfig(max_poll_calls=2, polling_exempt=False), False),
        (StuckConfig(max_poll_calls=2, mode="off"), False),
    ],
)
def test_no_cap_without_polling(config: StuckConfig, halts: bool) -> None:
    assert StuckDetector(config).check_pending(polls(2), pending(), TOOLS).halt is halts


def test_observe_mode_reports_the_cap_and_runs_the_call() -> None:
    decision = StuckDetector(StuckConfig(max_poll_calls=2, mode="observe")).check_pending(
        polls(2), pending(), TOOLS
    )
    assert decision.per_call == {"c999": "run"}
    assert decision.verdict is not None and decision.verdict.level == "would_halt"


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_poll_calls"):
        StuckConfig(max_poll_calls=0)
    with pytest.raises(ValueError, match="enforce_action"):
        StuckConfig(enforce_action="undo")  # type: ignore[arg-type]


def same_reads(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "summarise a"},
    ]
    for n in range(count):
        messages.append({"role": "assistant", "tool_calls": [call(n, "read", {"path": "a"})]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "text of a"})
    return messages


def test_rewind_keeps_the_first_round_and_leaves_a_note() -> None:
    messages = same_reads(3)
    original = copy.deepcopy(messages)
    detector = StuckDetector(StuckConfig(enforce_action="rewind"))
    decision = detector.check_pending(
        messages, {"role": "assistant", "tool_calls": [call(9, "read", {"path": "a"})]}, TOOLS
    )
    assert decision.verdict is not None and decision.verdict.level == "block"
    rewound = rewind(messages, decision.verdict)
    assert messages == original
    assert rewound[:3] == original[:3]
    assert [m["role"] for m in rewound] == ["system", "user", "assistant", "tool"]
    note = rewound[-1]["content"]
    assert note.startswith("text of a\n\n[loop-guard:identical_call 4/4]\n")
    assert 'read({"path":"a"}) 4 times' in note
    # The note counts as the nudge: the loop resumes from one round, already warned.
    assert detector.check_round(rewound, TOOLS) is None


def test_rewind_without_a_round_to_keep_only_adds_the_note() -> None:
    messages = same_reads(3)
    decision = StuckDetector().check_pending(
        messages, {"role": "assistant", "tool_calls": [call(9, "read", {"path": "a"})]}, TOOLS
    )
    assert decision.verdict is not None
    verdict = decision.verdict
    broken = dataclasses.replace(verdict, loop_start_index=1)
    rewound = rewind(messages, broken)
    assert rewound[:-1] == messages[:-1]
    assert rewound[-1]["content"] == "text of a\n\n" + verdict.message_to_model
