"""The detector driven the way the agent loop and the gateway use it (package docstring)."""

from __future__ import annotations

import json
from typing import Any

from toolrelay.stuck import (
    StuckConfig,
    StuckDetector,
    append_note,
    apply_nudge,
    final_answer_note,
    gateway_verdict,
    parse_mode,
)

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {}}}]


class StubbornModel:
    """A stand-in for a model that asks for the same call every round."""

    def __init__(self) -> None:
        self.rounds = 0

    def reply(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.rounds += 1
        call = {
            "id": f"call_{self.rounds}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": "a"})},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def run_agent(detector: StuckDetector, max_rounds: int = 10) -> tuple[list[Any], int, Any]:
    """A minimal agent loop; returns the transcript, tool executions and final verdict."""
    model = StubbornModel()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "summarise file a"}]
    executions = 0
    for _ in range(max_rounds):
        assistant = model.reply(messages)
        decision = detector.check_pending(messages, assistant, TOOLS)
        messages.append(assistant)
        blocked = {result["tool_call_id"]: result for result in decision.blocked_results()}
        for call in assistant["tool_calls"]:
            if decision.per_call[call["id"]] == "block":
                messages.append(blocked[call["id"]])
            else:
                executions += 1
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "A"})
        if decision.halt:
            return append_note(messages, decision.verdict.message_to_model), executions, decision
        verdict = detector.check_round(messages, TOOLS)
        if verdict is not None and verdict.level == "halt":
            return append_note(messages, verdict.message_to_model), executions, verdict
        if verdict is not None:
            messages = apply_nudge(messages, verdict)
    return messages, executions, None


def test_enforce_runs_the_call_three_times_then_blocks_then_halts() -> None:
    messages, executions, decision = run_agent(StuckDetector())
    assert executions == 3
    assert decision.verdict.pattern == "identical_call" and decision.verdict.level == "halt"
    contents = [m.get("content") or "" for m in messages if m["role"] == "tool"]
    assert contents[2].startswith("A\n\n[loop-guard:identical_call 3/4]")
    assert contents[3].startswith("[loop-guard:blocked identical_call] NOT EXECUTED")
    assert "[loop-guard:halt identical_call]" in contents[4]
    # Every call still has exactly one answer.
    call_ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert call_ids == [m["tool_call_id"] for m in messages if m["role"] == "tool"]


def test_observe_lets_every_call_run_and_leaves_no_trace() -> None:
    messages, executions, verdict = run_agent(StuckDetector(StuckConfig(mode="observe")))
    assert executions == 10 and verdict is None
    assert "loop-guard" not in json.dumps(messages)


def test_gateway_flow() -> None:
    config = StuckConfig(mode=parse_mode("enforce"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "summarise file a"}]
    model = StubbornModel()
    for _ in range(3):
        history.append(model.reply(history))
        history.append({"role": "tool", "tool_call_id": f"call_{model.rounds}", "content": "A"})
    verdict = gateway_verdict(history, config, tools=TOOLS)
    assert verdict is not None and verdict.enforced
    final_request = append_note(history, final_answer_note(verdict))
    assert final_request[-1]["content"].startswith("A\n\n[loop-guard:halt identical_call]")
    assert verdict.to_public_dict()["tools"] == ["read"]
