"""Configuration, the gateway entry point and the agent-loop helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrelay.stuck import (
    Ladder,
    StuckConfig,
    StuckDetector,
    Thresholds,
    append_note,
    apply_nudge,
    final_answer_note,
    gateway_verdict,
    name_saturation,
    parse_mode,
)


def call_round(n: int, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    call_id = f"call_{n}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def conversation(*rounds: tuple[str, dict[str, Any], str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n, (name, args, result) in enumerate(rounds):
        messages += call_round(n, name, args, result)
    return messages


READ_A = ("read", {"path": "a"}, "contents")


# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("text", "mode"), [("enforce", "enforce"), (" Observe ", "observe"), ("OFF", "off")]
)
def test_parse_mode_accepts_the_three_modes(text: str, mode: str) -> None:
    assert parse_mode(text) == mode


@pytest.mark.parametrize("text", ["", "on", "enforcing", "true"])
def test_parse_mode_rejects_anything_else_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="expected one of enforce, observe, off"):
        parse_mode(text)


def test_config_rejects_a_bad_mode_and_bad_ladders() -> None:
    with pytest.raises(ValueError, match="invalid stuck-detector mode"):
        StuckConfig(mode="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rise"):
        Ladder(nudge=4, block=3)
    with pytest.raises(ValueError, match="at least one"):
        Ladder()
    with pytest.raises(ValueError, match="positive"):
        Ladder(nudge=0, block=2)


def test_halt_defaults_to_the_repeat_after_a_block() -> None:
    assert Ladder(nudge=3, block=4).halt_at == 5
    assert Ladder(nudge=3, halt=6).halt_at == 6
    assert Thresholds().identical_call.as_dict() == {"nudge": 3, "block": 4, "halt": 5}


def test_custom_thresholds_apply() -> None:
    config = StuckConfig(thresholds=Thresholds(identical_call=Ladder(nudge=2, block=3)))
    verdict = StuckDetector(config).check_round(conversation(READ_A, READ_A))
    assert verdict is not None and (verdict.pattern, verdict.count) == ("identical_call", 2)


def test_polling_exemption_can_be_switched_off() -> None:
    poll = ("job_status", {"id": 1}, "running")
    assert StuckDetector().check_round(conversation(poll, poll, poll)) is None
    strict = StuckDetector(StuckConfig(polling_exempt=False))
    verdict = strict.check_round(conversation(poll, poll, poll))
    assert verdict is not None and verdict.pattern == "identical_call"


def test_is_polling_predicate_marks_calls_by_their_arguments() -> None:
    config = StuckConfig(
        is_polling=lambda name, args: name == "terminal_input" and not args["chars"]
    )
    detector = StuckDetector(config)
    poll = ("terminal_input", {"chars": ""}, "still compiling")
    typed = ("terminal_input", {"chars": "y"}, "still compiling")
    assert detector.check_round(conversation(*[poll] * 9)) is None
    verdict = detector.check_round(conversation(*[poll] * 10))
    assert verdict is not None and verdict.pattern == "polling_no_progress"
    # The exemption is per signature: the same tool with input is a normal call.
    verdict = detector.check_round(conversation(typed, typed, typed))
    assert verdict is not None and verdict.pattern == "identical_call"


def test_polling_globs_are_configurable() -> None:
    config = StuckConfig(polling_tools=("ping_*",))
    poll = ("ping_server", {}, "down")
    assert StuckDetector(config).check_round(conversation(poll, poll, poll)) is None
    status = ("job_status", {}, "running")
    assert StuckDetector(config).check_round(conversation(status, status, status)) is not None


# --------------------------------------------------------------- gateway


def test_gateway_declares_a_loop_at_the_third_identical_call() -> None:
    assert gateway_verdict(conversation(READ_A, READ_A)) is None
    verdict = gateway_verdict(conversation(READ_A, READ_A, READ_A))
    assert verdict is not None
    public = verdict.to_public_dict()
    explanation = public.pop("explanation")
    assert public == {
        "pattern": "identical_call",
        "level": "halt",
        "count": 3,
        "thresholds": {"nudge": 3, "block": 4, "halt": 5},
        "table": "gateway",
        "triggered_at": 3,
        "tools": ["read"],
        "mode": "enforce",
    }
    # A reader can reconcile level halt at count 3 with a ladder that halts at 5.
    assert "counted 3, reaching 3, its first threshold" in explanation
    assert "cannot nudge or block" in explanation
    assert verdict.message_to_model.startswith("[loop-guard:halt identical_call]")


def test_gateway_uses_each_pattern_s_first_threshold() -> None:
    test = ("test", {}, "1 failed")
    verdict = gateway_verdict(conversation(READ_A, test, READ_A, test))
    assert verdict is not None
    assert verdict.to_public_dict()["period"] == 2
    assert (verdict.pattern, verdict.count, verdict.tool_names) == ("cycle", 2, ("read", "test"))
    failing = ("run", {"cmd": "foo"}, "Error: command not found")
    verdict = gateway_verdict(conversation(failing, failing))
    assert verdict is not None and verdict.pattern == "identical_error"


def test_gateway_only_looks_after_the_last_real_user_message() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    messages.append({"role": "user", "content": "try something else"})
    messages += call_round(9, *READ_A)
    assert gateway_verdict(messages) is None
    messages.append({"role": "user", "content": "[loop-guard:identical_call 3/4] not a user"})
    messages += call_round(10, *READ_A) + call_round(11, *READ_A)
    assert gateway_verdict(messages) is not None


def test_gateway_modes() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    observed = gateway_verdict(messages, StuckConfig(mode="observe"))
    assert observed is not None
    assert observed.to_public_dict()["level"] == "would_halt"
    assert observed.to_public_dict()["mode"] == "observe"
    assert gateway_verdict(messages, StuckConfig(mode="off")) is None


def test_gateway_recognises_undeclared_tools_from_the_request() -> None:
    typo = ("read_fiel", {"path": "a"}, "Error: something went wrong")
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    assert gateway_verdict(conversation(typo, typo)) is not None  # identical_error anyway
    verdict = gateway_verdict(conversation(typo, typo), tools=tools)
    assert verdict is not None and verdict.pattern == "unknown_tool"


def test_final_answer_note_explains_and_asks_for_an_answer() -> None:
    verdict = gateway_verdict(conversation(READ_A, READ_A, READ_A))
    assert verdict is not None
    note = final_answer_note(verdict)
    assert note.startswith("[loop-guard:halt identical_call]")
    assert 'read({"path":"a"})' in note and "best final answer" in note
    assert "what kept you from making progress" in note


def test_window_is_capped_at_the_last_fifty_calls() -> None:
    test = ("test", {}, "1 failed")
    messages = conversation(*[READ_A, test] * 40)
    verdict = gateway_verdict(messages)
    assert verdict is not None and verdict.pattern == "cycle"
    assert verdict.count == 25
    assert verdict.loop_start_index == len(messages) - 100


def test_namespaced_names_and_schema_defaults_resolve_against_declared_tools() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "parameters": {"properties": {"path": {}, "limit": {"default": 100}}},
            },
        }
    ]
    messages = conversation(
        ("default_api.read", {"path": "a"}, "x"),
        ("read", {"path": "a", "limit": 100}, "x"),
        ("read", {"path": "a"}, "x"),
    )
    verdict = StuckDetector().check_round(messages, tools)
    assert verdict is not None and verdict.pattern == "identical_call"
    assert StuckDetector().check_round(messages) is None


# ------------------------------------------------------- agent-loop helpers


def pending(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"p{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(a)},
            }
            for n, (name, a) in enumerate(calls)
        ],
    }


def test_only_the_looping_call_of_a_round_is_blocked() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    decision = StuckDetector().check_pending(
        messages, pending(("read", {"path": "a"}), ("grep", {}))
    )
    assert decision.per_call == {"p0": "block", "p1": "run"}
    assert [result["tool_call_id"] for result in decision.blocked_results()] == ["p0"]
    assert not decision.halt


def test_a_halt_stops_every_call_of_the_round() -> None:
    messages = conversation(READ_A, READ_A, READ_A, READ_A)
    decision = StuckDetector().check_pending(
        messages, pending(("read", {"path": "a"}), ("grep", {}))
    )
    assert decision.halt
    assert decision.per_call == {"p0": "block", "p1": "block"}


def test_parallel_duplicates_of_a_blocked_call_are_all_answered() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    decision = StuckDetector().check_pending(
        messages, pending(("read", {"path": "a"}), ("read", {"path": "a"}))
    )
    assert decision.per_call == {"p0": "block", "p1": "block"}


def test_a_pending_message_without_calls_needs_nothing() -> None:
    decision = StuckDetector().check_pending(conversation(READ_A), {"role": "assistant"})
    assert decision.per_call == {} and decision.verdict is None


def test_results_are_paired_by_position_when_ids_are_missing() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    for message in messages:
        message.pop("tool_call_id", None)
        for call in message.get("tool_calls") or []:
            call.pop("id")
    verdict = StuckDetector().check_round(messages)
    assert verdict is not None and verdict.pattern == "identical_call"


def test_apply_nudge_copies_and_appends_to_the_last_tool_result() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    before = json.dumps(messages)
    verdict = StuckDetector().check_round(messages)
    assert verdict is not None
    nudged = apply_nudge(messages, verdict)
    assert json.dumps(messages) == before
    assert nudged[-1]["content"] == "contents\n\n" + verdict.message_to_model
    assert nudged[:-1] == messages[:-1]
    observed = StuckDetector(StuckConfig(mode="observe")).check_round(messages)
    assert observed is not None and apply_nudge(messages, observed) == messages


def test_append_note_handles_content_parts_and_missing_tool_results() -> None:
    parts = [{"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "r"}]}]
    [tool] = append_note(parts, "note")
    assert tool["content"][-1] == {"type": "text", "text": "\n\nnote"}
    assert append_note([{"role": "assistant", "content": "hi"}], "note")[-1] == {
        "role": "user",
        "content": "note",
    }


def test_a_nudge_on_content_parts_is_still_recognised() -> None:
    messages = conversation(READ_A, READ_A, READ_A)
    messages[-1]["content"] = [{"type": "text", "text": "contents"}]
    verdict = StuckDetector().check_round(messages)
    assert verdict is not None
    assert StuckDetector().check_round(apply_nudge(messages, verdict)) is None


def test_name_saturation_is_information_only() -> None:
    reads = [("read", {"path": f"f{n}"}, f"c{n}") for n in range(10)]
    assert name_saturation(conversation(*reads)) == "read"
    mixed = [(name, {}, name) for name in "abcdefghij"]
    assert name_saturation(conversation(*mixed)) is None
    assert StuckDetector().check_round(conversation(*reads)) is None


def test_verdict_carries_the_evidence() -> None:
    messages = conversation(("grep", {}, "x"), READ_A, READ_A, READ_A)
    verdict = StuckDetector().check_round(messages)
    assert verdict is not None
    assert verdict.signature is not None and verdict.canonical_args == '{"path":"a"}'
    assert verdict.result_excerpt == "contents" and verdict.error_excerpt is None
    assert [call.name for call in verdict.calls] == ["read"]
    assert (verdict.first_index, verdict.loop_start_index, verdict.last_index) == (3, 3, 8)
    assert verdict.suggested_actions and verdict.enforced and verdict.rung == "nudge"


def test_config_accepts_lists_and_sets_from_a_config_file() -> None:
    config = StuckConfig(
        polling_tools=["ping_*"],  # type: ignore[arg-type]
        volatile_arg_keys={"note"},  # type: ignore[arg-type]
    )
    assert config.polling_tools == ("ping_*",) and config.volatile_arg_keys == frozenset({"note"})
    hash(config)
    poll = ("ping_server", {"note": "again"}, "down")
    assert StuckDetector(config).check_round(conversation(poll, poll, poll)) is None


def parallel(n: int, calls: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
    ids = [f"call_{n}_{i}" for i in range(len(calls))]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
            for i, (name, a, _) in zip(ids, calls, strict=True)
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": i, "content": result}
        for i, (_, _, result) in zip(ids, calls, strict=True)
    ]
    return [assistant, *results]


def test_a_call_repeated_beside_different_calls_is_not_repeated_in_a_row() -> None:
    detector = StuckDetector()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for n in range(8):
        edit = ("edit", {"path": "f", "old": f"o{n}", "new": f"n{n}"}, "ok")
        messages += parallel(n, [edit, ("test", {}, f"{8 - n} failed")])
        assert detector.check_round(messages) is None
    decision = detector.check_pending(messages, pending(("test", {})))
    assert decision.verdict is None


def test_the_same_parallel_round_again_and_again_is_a_loop() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
    for n in range(3):
        messages += parallel(n, [READ_A, ("read", {"path": "b"}, "B")])
    decision = StuckDetector().check_pending(messages, pending(("read", {"path": "a"})))
    assert decision.per_call == {"p0": "block"}


def test_very_long_results_and_arguments_are_compared_too() -> None:
    big = "line of output\n" * 10_000
    big_args = {"path": "a", "content": "x" * 50_000}
    looping = ("write_file", big_args, big)
    verdict = StuckDetector().check_round(conversation(looping, looping))
    assert verdict is not None and verdict.pattern == "side_effect_repeat"
    changed = ("read", {"path": "a"}, big + "one more line")
    assert StuckDetector().check_round(conversation(READ_A, changed, READ_A)) is None
