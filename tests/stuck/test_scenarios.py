"""The 55 scenarios of stuck-detector.md, one test each (numbered like the table).

Conversations are built the way an agent loop builds them: after every round
``check_round`` runs and, in enforce mode, its nudge is attached with
``apply_nudge``; blocked calls get the synthetic results of ``check_pending``.
"""

from __future__ import annotations

import json
from typing import Any

from toolrelay.stuck import (
    Decision,
    StuckConfig,
    StuckDetector,
    Verdict,
    apply_nudge,
    final_answer_note,
    name_saturation,
)

ENFORCE = StuckDetector()
OBSERVE = StuckDetector(StuckConfig(mode="observe"))
OFF = StuckDetector(StuckConfig(mode="off"))
TOOLS = [
    *("read", "write", "run", "test", "shell", "grep", "cat", "job_status", "read_file"),
    *("edit", "send_email", "a", "b", "c"),
]

Call = tuple[str, Any]  # (name, args as a dict or as the raw arguments text)


class Conversation:
    """A transcript under construction, with the detector's hooks applied like a loop would."""

    def __init__(self, detector: StuckDetector = ENFORCE, user: str = "do the task") -> None:
        self.detector = detector
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        self.verdicts: list[Verdict | None] = []
        self._ids = 0

    def _next_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids:04d}"

    def assistant(self, calls: list[Call], text: str | None = None) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": self._next_id(),
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for name, args in calls
            ],
        }

    def round(
        self,
        calls: list[Call],
        results: list[str],
        *,
        errors: bool | None = None,
        text: str | None = None,
        raw: list[str] | None = None,
        check: bool = True,
    ) -> Verdict | None:
        """Append one assistant message and its results, then run ``check_round``."""
        message = self.assistant(calls, text)
        self.messages.append(message)
        for position, (call, result) in enumerate(zip(message["tool_calls"], results, strict=True)):
            tool: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": result,
            }
            if errors is not None:
                tool["is_error"] = errors
            if raw is not None:
                tool["raw_content"] = raw[position]
            self.messages.append(tool)
        return self.after_round() if check else None

    def call(self, name: str, args: Any, result: str, **options: Any) -> Verdict | None:
        return self.round([(name, args)], [result], **options)

    def say(self, text: str | None) -> Verdict | None:
        self.messages.append({"role": "assistant", "content": text})
        return self.after_round()

    def after_round(self) -> Verdict | None:
        verdict = self.detector.check_round(self.messages, TOOLS)
        self.verdicts.append(verdict)
        if verdict is not None:
            self.messages = apply_nudge(self.messages, verdict)
        return verdict

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def pending(self, calls: list[Call]) -> tuple[dict[str, Any], Decision]:
        message = self.assistant(calls)
        return message, self.detector.check_pending(self.messages, message, TOOLS)

    def run_pending(self, message: dict[str, Any], decision: Decision, results: list[str]) -> None:
        """Execute the allowed calls of a checked message, answer the blocked ones."""
        self.messages.append(message)
        blocked = {item["tool_call_id"]: item for item in decision.blocked_results()}
        for call, result in zip(message["tool_calls"], results, strict=True):
            if call["id"] in blocked:
                self.messages.append(blocked[call["id"]])
            else:
                answer = {"role": "tool", "tool_call_id": call["id"], "content": result}
                self.messages.append(answer)
        self.after_round()


def expect(verdict: Verdict | None, pattern: str, level: str, count: int | None = None) -> Verdict:
    assert verdict is not None, f"expected {level} {pattern}, got nothing"
    assert (verdict.pattern, verdict.level) == (pattern, level), verdict
    if count is not None:
        assert verdict.count == count, verdict
    return verdict


def repeat(conv: Conversation, times: int, name: str, args: Any, result: str, **options: Any):
    for _ in range(times):
        last = conv.call(name, args, result, **options)
    return last


def no_verdict_so_far(conv: Conversation) -> None:
    assert conv.verdicts and all(verdict is None for verdict in conv.verdicts), conv.verdicts


# --------------------------------------------------------------- 1-5: basics


def test_01_single_call_is_fine() -> None:
    conv = Conversation()
    conv.call("read", {"path": "a"}, "contents of a")
    no_verdict_so_far(conv)


def test_02_two_identical_calls_are_fine() -> None:
    conv = Conversation()
    repeat(conv, 2, "read", {"path": "a"}, "contents of a")
    no_verdict_so_far(conv)


def test_03_third_identical_call_nudges_on_the_third_result() -> None:
    conv = Conversation()
    verdict = repeat(conv, 3, "read", {"path": "a"}, "contents of a")
    verdict = expect(verdict, "identical_call", "nudge", 3)
    assert verdict.thresholds.block == 4
    last_result = conv.messages[-1]
    assert last_result["role"] == "tool"
    assert last_result["content"].startswith("contents of a\n\n[loop-guard:identical_call 3/4]")
    assert "read" in verdict.message_to_model and "final answer" in verdict.message_to_model


def _after_block(conv: Conversation) -> Decision:
    repeat(conv, 3, "read", {"path": "a"}, "contents of a")
    message, decision = conv.pending([("read", {"path": "a"})])
    conv.run_pending(message, decision, ["never used"])
    return decision


def test_04_fourth_identical_call_is_blocked_before_it_runs() -> None:
    conv = Conversation()
    repeat(conv, 3, "read", {"path": "a"}, "contents of a")
    message, decision = conv.pending([("read", {"path": "a"})])
    call_id = message["tool_calls"][0]["id"]
    assert decision.per_call == {call_id: "block"}
    expect(decision.verdict, "identical_call", "block", 4)
    [result] = decision.blocked_results()
    assert result["tool_call_id"] == call_id
    assert result["is_error"] is True and result["blocked_by"] == "loop-guard"
    assert result["content"].startswith("[loop-guard:blocked identical_call] NOT EXECUTED")
    assert decision.verdict is not None and decision.verdict.blocked_call_ids == (call_id,)


def test_05_repeat_after_a_block_halts() -> None:
    conv = Conversation()
    _after_block(conv)
    _, decision = conv.pending([("read", {"path": "a"})])
    assert decision.halt
    verdict = expect(decision.verdict, "identical_call", "halt")
    # final_answer_on_halt belongs to the agent loop; the library supplies the note.
    assert verdict.message_to_model.startswith("[loop-guard:halt identical_call]")
    assert "final answer" in final_answer_note(verdict)


# ------------------------------------------------------- 6-11: normalisation


def test_06_key_order_whitespace_and_nulls_do_not_hide_a_repeat() -> None:
    conv = Conversation()
    conv.call("read", '{"path":"a"}', "A")
    conv.call("read", '{ "path" : "a" }', "A")
    verdict = conv.call("read", '{"limit": null, "path": "a"}', "A")
    expect(verdict, "identical_call", "nudge", 3)


def test_07_double_encoded_arguments_are_unwrapped() -> None:
    conv = Conversation()
    conv.call("read", {"path": "a"}, "A")
    conv.call("read", json.dumps(json.dumps({"path": "a"})), "A")
    verdict = conv.call("read", {"path": "a"}, "A")
    expect(verdict, "identical_call", "nudge", 3)


def test_08_volatile_description_is_ignored() -> None:
    conv = Conversation()
    for description in ("check the repo", "see what changed", "look at git state"):
        verdict = conv.call(
            "shell", {"cmd": "git status", "description": description}, "nothing to commit"
        )
    expect(verdict, "identical_call", "nudge", 3)


def test_09_pids_timestamps_and_uuids_are_masked_in_results() -> None:
    conv = Conversation()
    outputs = [
        "worker pid 4242 started 2026-11-29T10:00:01Z id 1b4e28ba-2fa1-11d2-883f-0016e0bc8d37",
        "worker pid 5150 started 2026-11-29T10:00:07Z id 6fa459ea-ee8a-3ca4-894e-db77e160355e",
        "worker PID: 77 started 2026-11-29 10:01:13 id 9c5b94b1-35ad-49bb-b118-8e8fc24abf80",
    ]
    for output in outputs:
        verdict = conv.call("run", {"cmd": "ps"}, output)
    expect(verdict, "identical_call", "nudge", 3)


def test_10_paths_are_normalised() -> None:
    conv = Conversation()
    for path in ("./src/../src/a.py", "src/a.py", "src/a.py/"):
        verdict = conv.call("read", {"path": path}, "print('a')")
    expect(verdict, "identical_call", "nudge", 3)


def test_11_different_prose_around_identical_calls_is_ignored() -> None:
    conv = Conversation()
    for text in ("Let me read a.", "Reading a again to be sure.", "One more look at a."):
        verdict = conv.round([("read", {"path": "a"})], ["A"], text=text)
    expect(verdict, "identical_call", "nudge", 3)


# ------------------------------------------------- 12-14: changing results


def test_12_growing_log_four_times_is_fine() -> None:
    conv = Conversation()
    for lines in range(1, 5):
        conv.call("cat", {"path": "log"}, "line\n" * lines)
    no_verdict_so_far(conv)


def test_13_fifth_read_of_a_changing_log_nudges() -> None:
    conv = Conversation()
    for lines in range(1, 6):
        verdict = conv.call("cat", {"path": "log"}, "line\n" * lines)
    verdict = expect(verdict, "identical_call_changing_result", "nudge", 5)
    assert (verdict.thresholds.nudge, verdict.thresholds.block) == (5, 8)


def test_14_eighth_read_of_a_changing_log_is_blocked() -> None:
    conv = Conversation()
    for lines in range(1, 8):
        conv.call("cat", {"path": "log"}, "line\n" * lines)
    _, decision = conv.pending([("cat", {"path": "log"})])
    expect(decision.verdict, "identical_call_changing_result", "block", 8)


# ------------------------------------------------------------ 15-19: polling


def test_15_polling_with_progress_is_never_a_loop() -> None:
    conv = Conversation()
    for step in range(1, 16):
        conv.call("job_status", {"id": 1}, f"running {step * 6}%")
    no_verdict_so_far(conv)
    _, decision = conv.pending([("job_status", {"id": 1})])
    assert decision.verdict is None


def test_16_nine_identical_polls_are_fine() -> None:
    conv = Conversation()
    repeat(conv, 9, "job_status", {"id": 1}, "running")
    no_verdict_so_far(conv)


def test_17_tenth_identical_poll_nudges_to_back_off() -> None:
    conv = Conversation()
    verdict = repeat(conv, 10, "job_status", {"id": 1}, "running")
    verdict = expect(verdict, "polling_no_progress", "nudge", 10)
    assert verdict.polling
    assert "Wait longer between checks" in verdict.message_to_model
    assert "From call 20 on" in verdict.message_to_model


def test_18_twentieth_identical_poll_is_blocked() -> None:
    conv = Conversation()
    repeat(conv, 19, "job_status", {"id": 1}, "running")
    _, decision = conv.pending([("job_status", {"id": 1})])
    expect(decision.verdict, "polling_no_progress", "block", 20)


def test_19_polling_errors_are_not_exempt() -> None:
    conv = Conversation()
    verdict = repeat(conv, 2, "job_status", {"id": 1}, "Error: 404 job not found")
    expect(verdict, "identical_error", "nudge", 2)


# ------------------------------------------------------------- 20-25: errors


def test_20_second_identical_error_nudges() -> None:
    conv = Conversation()
    verdict = repeat(conv, 2, "run", {"cmd": "foo"}, "command not found: foo", errors=True)
    verdict = expect(verdict, "identical_error", "nudge", 2)
    assert verdict.thresholds.block == 3
    assert verdict.error_excerpt == "command not found: foo"


def test_21_identical_error_blocks_then_halts() -> None:
    conv = Conversation()
    repeat(conv, 2, "run", {"cmd": "foo"}, "command not found: foo", errors=True)
    message, decision = conv.pending([("run", {"cmd": "foo"})])
    expect(decision.verdict, "identical_error", "block", 3)
    conv.run_pending(message, decision, ["unused"])
    _, decision = conv.pending([("run", {"cmd": "foo"})])
    expect(decision.verdict, "identical_error", "halt")


def test_22_three_different_errors_are_fine() -> None:
    conv = Conversation()
    for error in ("Error: no such file", "Error: permission denied", "Error: disk full"):
        conv.call("run", {"cmd": "foo"}, error)
    no_verdict_so_far(conv)


def test_23_fourth_failure_in_a_row_nudges_error_streak() -> None:
    conv = Conversation()
    errors = ("Error: no such file", "Error: permission denied", "Error: disk full", "Error: busy")
    for error in errors:
        verdict = conv.call("run", {"cmd": "foo"}, error)
    verdict = expect(verdict, "error_streak", "nudge", 4)
    assert verdict.thresholds.halt_at == 8


def test_24_same_error_with_different_arguments_nudges_then_halts() -> None:
    conv = Conversation()
    verdicts = [
        conv.call("read", {"path": f"x{n}"}, f"Error: [Errno 13] Permission denied: 'x{n}'")
        for n in range(1, 7)
    ]
    expect(verdicts[2], "repeated_error", "nudge", 3)
    assert verdicts[3] is None and verdicts[4] is None
    expect(verdicts[5], "repeated_error", "halt", 6)


def test_25_eight_failures_across_tools_halt() -> None:
    conv = Conversation()
    tools = ["read", "write", "run", "grep"]
    for n in range(8):
        verdict = conv.call(tools[n % 4], {"n": n}, f"Error: failure number {n} of kind {n * 7}")
    expect(verdict, "error_streak", "halt", 8)
    expect(conv.verdicts[3], "error_streak", "nudge", 4)


# ------------------------------------------------------- 26-28: unknown tool

UNKNOWN = "Error: unknown tool 'read_fiel'. Valid tools: read, write"


def test_26_one_unknown_tool_call_is_left_to_the_normal_error() -> None:
    conv = Conversation()
    conv.call("read_fiel", {"path": "a"}, UNKNOWN)
    no_verdict_so_far(conv)


def test_27_second_unknown_tool_call_nudges_with_the_valid_tools() -> None:
    conv = Conversation()
    verdict = repeat(conv, 2, "read_fiel", {"path": "a"}, UNKNOWN)
    verdict = expect(verdict, "unknown_tool", "nudge", 2)
    assert "read_file" in verdict.message_to_model and "job_status" in verdict.message_to_model
    # Without the tools list the error text alone gives the pattern away.
    without_nudge = [*conv.messages[:-1], dict(conv.messages[-1], content=UNKNOWN)]
    plain = StuckDetector().check_round(without_nudge)
    expect(plain, "unknown_tool", "nudge", 2)


def test_28_third_unknown_tool_call_halts() -> None:
    conv = Conversation()
    repeat(conv, 2, "read_fiel", {"path": "a"}, UNKNOWN)
    _, decision = conv.pending([("read_fiel", {"path": "a"})])
    expect(decision.verdict, "unknown_tool", "halt", 3)
    # The same when the loop only checks after the round.
    verdict = conv.call("read_fiel", {"path": "a"}, UNKNOWN)
    expect(verdict, "unknown_tool", "halt", 3)


# ------------------------------------------------------------- 29-34: cycles


def test_29_two_full_a_b_cycles_nudge() -> None:
    conv = Conversation()
    for _ in range(2):
        conv.call("read", {"path": "a"}, "r1")
        verdict = conv.call("test", {}, "1 failed: test_a")
    verdict = expect(verdict, "cycle", "nudge", 2)
    assert verdict.period == 2
    assert verdict.tool_names == ("read", "test")
    assert "going round in a circle" in verdict.message_to_model


def test_30_call_completing_the_third_cycle_is_blocked() -> None:
    conv = Conversation()
    for _ in range(2):
        conv.call("read", {"path": "a"}, "r1")
        conv.call("test", {}, "1 failed: test_a")
    assert conv.call("read", {"path": "a"}, "r1") is None
    _, decision = conv.pending([("test", {})])
    verdict = expect(decision.verdict, "cycle", "block", 3)
    assert verdict.loop_start_index == 1


def test_31_cycle_with_changing_output_is_fine() -> None:
    conv = Conversation()
    for n in range(3):
        conv.call("read", {"path": "a"}, "r1")
        conv.call("test", {}, f"{n + 1} failed")
    no_verdict_so_far(conv)


def test_32_edit_test_debugging_is_fine() -> None:
    conv = Conversation()
    for n in range(4):
        conv.call("edit", {"path": "f", "old": f"old{n}", "new": f"new{n}"}, "ok")
        conv.call("test", {}, f"fail{n}")
    no_verdict_so_far(conv)
    _, decision = conv.pending([("edit", {"path": "f", "old": "old9", "new": "new9"})])
    assert decision.verdict is None


def test_33_non_strict_alternation_is_fine() -> None:
    conv = Conversation()
    for name in ("a", "b", "a", "c", "a", "b"):
        conv.call(name, {}, f"result of {name}")
    no_verdict_so_far(conv)


def test_34_period_three_cycle_nudges_then_blocks() -> None:
    conv = Conversation()
    for _ in range(2):
        for name in ("a", "b", "c"):
            verdict = conv.call(name, {}, f"result of {name}")
    verdict = expect(verdict, "cycle", "nudge", 2)
    assert verdict.period == 3
    conv.call("a", {}, "result of a")
    conv.call("b", {}, "result of b")
    _, decision = conv.pending([("c", {})])
    expect(decision.verdict, "cycle", "block", 3)


# --------------------------------------------------- 35-38: near-identical


def test_35_a_batch_of_different_reads_is_fine() -> None:
    conv = Conversation()
    for n in range(1, 11):
        conv.call("read", {"path": f"f{n}"}, f"contents {n}")
    no_verdict_so_far(conv)
    assert name_saturation(conv.messages) == "read"


SAME_LISTING = "drwxr-xr-x  4 me me 4096 .\n-rw-r--r--  1 me me  120 a.py"


def test_36_fourth_near_identical_call_nudges() -> None:
    conv = Conversation()
    for command in ("ls -la src", "ls -al src", "ls -l -a src", "ls -la src "):
        verdict = conv.call("shell", {"command": command}, SAME_LISTING)
    assert conv.verdicts[:3] == [None, None, None]
    verdict = expect(verdict, "near_identical", "nudge", 4)
    assert "Small variations" in verdict.message_to_model


def test_37_sixth_near_identical_call_is_blocked() -> None:
    conv = Conversation()
    for command in ("ls -la src", "ls -al src", "ls -l -a src", "ls -la src ", "ls -a -l src"):
        conv.call("shell", {"command": command}, SAME_LISTING)
    _, decision = conv.pending([("shell", {"command": "ls  -al   src"})])
    expect(decision.verdict, "near_identical", "block", 6)


def test_38_near_identical_calls_with_different_results_are_fine() -> None:
    conv = Conversation()
    for n, pattern in enumerate(("TODO", "TODO:", "todo", "TODO(", "TODO ")):
        conv.call("grep", {"pattern": pattern, "path": "src"}, f"{n} matches")
    no_verdict_so_far(conv)


# --------------------------------------------------- 39-43: rounds and resets


def test_39_repeated_parallel_rounds_count_as_identical_calls() -> None:
    conv = Conversation()
    for _ in range(3):
        verdict = conv.round([("read", {"path": "a"}), ("read", {"path": "b"})], ["A", "B"])
    expect(verdict, "identical_call", "nudge", 3)


def test_40_a_duplicate_inside_one_round_counts_once() -> None:
    # Running the duplicate once and answering its id with a reference is the
    # agent loop's part; the detector's part is to count the pair as one call.
    conv = Conversation()
    conv.round([("read", {"path": "a"}), ("read", {"path": "a"})], ["A", "A"])
    no_verdict_so_far(conv)


def test_41_a_real_user_message_resets_the_window() -> None:
    conv = Conversation()
    repeat(conv, 2, "read", {"path": "a"}, "A")
    conv.user("try again")
    repeat(conv, 2, "read", {"path": "a"}, "A")
    no_verdict_so_far(conv)


def test_42_own_notes_do_not_reset_the_streak() -> None:
    conv = Conversation()
    expect(repeat(conv, 3, "read", {"path": "a"}, "A"), "identical_call", "nudge")
    assert "[loop-guard:identical_call" in conv.messages[-1]["content"]
    # A tagged user note (as an engine might add) is not a real user turn either.
    conv.messages.append({"role": "user", "content": "[loop-guard:identical_call 3/4] note"})
    _, decision = conv.pending([("read", {"path": "a"})])
    expect(decision.verdict, "identical_call", "block", 4)


def test_43_side_effect_repeat_nudges_then_blocks() -> None:
    conv = Conversation()
    args = {"to": "x@example.org", "body": "hello"}
    verdict = repeat(conv, 2, "send_email", args, "sent")
    expect(verdict, "side_effect_repeat", "nudge", 2)
    _, decision = conv.pending([("send_email", args)])
    expect(decision.verdict, "side_effect_repeat", "block", 3)


# ------------------------------------------------ 44-46: text-only rounds


def test_44_monologue_nudges_then_halts() -> None:
    conv = Conversation()
    assert conv.say("I will read the file.") is None
    verdict = expect(conv.say("I will  read the file."), "monologue", "nudge", 2)
    # No tool result to carry the nudge: it goes into a tagged user message.
    assert conv.messages[-1]["role"] == "user"
    assert conv.messages[-1]["content"] == verdict.message_to_model
    expect(conv.say("I will read the file."), "monologue", "halt", 3)


def test_45_one_empty_round_is_not_the_detector_s_business() -> None:
    # The non-streaming retry and the sticky flag live in the agent loop; the
    # detector only has to stay quiet about a single empty round.
    conv = Conversation()
    assert conv.say(None) is None


def test_46_three_consecutive_empty_rounds_halt() -> None:
    # The loop raises EmptyResponseError; the library's share is the halt verdict.
    conv = Conversation()
    assert conv.say("") is None
    assert conv.say(None) is None
    expect(conv.say("  "), "empty_round", "halt", 3)


# ---------------------------------------------------------- 47-49: details


def test_47_fingerprint_uses_the_untruncated_raw_content() -> None:
    shown = "x" * 12_000
    conv = Conversation()
    for n in range(3):
        conv.call("cat", {"path": "big"}, shown, raw=[shown + f" tail {n}"])
    no_verdict_so_far(conv)
    # Without raw_content the truncated view would look like a loop.
    control = Conversation()
    expect(repeat(control, 3, "cat", {"path": "big"}, shown), "identical_call", "nudge")


def test_48_identical_invalid_json_arguments_get_a_raw_signature() -> None:
    conv = Conversation()
    error = "Error: invalid JSON arguments: Expecting ',' delimiter: line 1 column 13"
    verdict = repeat(conv, 2, "read", '{"path": "a"', error)
    verdict = expect(verdict, "identical_error", "nudge", 2)
    assert verdict.canonical_args == 'RAW:{"path": "a"'


def test_49_functions_prefix_is_ignored() -> None:
    conv = Conversation()
    for name in ("functions.read_file", "read_file", "functions.read_file"):
        verdict = conv.call(name, {"path": "a"}, "A")
    expect(verdict, "identical_call", "nudge", 3)


# ---------------------------------------------------------------- 50-55


def test_50_observe_reports_would_block_and_changes_nothing() -> None:
    conv = Conversation(OBSERVE)
    verdict = repeat(conv, 3, "read", {"path": "a"}, "A")
    expect(verdict, "identical_call", "would_nudge", 3)
    assert "[loop-guard" not in json.dumps(conv.messages)
    message, decision = conv.pending([("read", {"path": "a"})])
    assert decision.per_call == {message["tool_calls"][0]["id"]: "run"}
    assert decision.blocked_results() == []
    verdict = expect(decision.verdict, "identical_call", "would_block", 4)
    assert not verdict.enforced and verdict.rung == "block"


def test_51_observe_reports_would_halt_and_the_run_goes_on() -> None:
    conv = Conversation(OBSERVE)
    repeat(conv, 3, "read", {"path": "a"}, "A")
    message, decision = conv.pending([("read", {"path": "a"})])
    conv.run_pending(message, decision, ["A"])  # observe: the 4th call really runs
    assert conv.verdicts[-1] is None  # would_block was already reported before it ran
    _, decision = conv.pending([("read", {"path": "a"})])
    assert set(decision.per_call.values()) == {"run"}
    expect(decision.verdict, "identical_call", "would_halt", 5)
    assert "[loop-guard" not in json.dumps(conv.messages)


def test_52_off_computes_nothing() -> None:
    conv = Conversation(OFF)
    repeat(conv, 4, "read", {"path": "a"}, "A")
    no_verdict_so_far(conv)
    message, decision = conv.pending([("read", {"path": "a"})])
    assert decision.verdict is None
    assert decision.per_call == {message["tool_calls"][0]["id"]: "run"}


def test_53_verdict_points_at_the_start_of_the_loop() -> None:
    conv = Conversation()
    conv.call("grep", {"pattern": "x"}, "no match")
    start = len(conv.messages)
    verdict = expect(repeat(conv, 3, "read", {"path": "a"}, "A"), "identical_call", "nudge", 3)
    assert verdict.loop_start_index == start
    assert conv.messages[start]["tool_calls"][0]["function"]["name"] == "read"
    assert verdict.first_index <= verdict.last_index == len(conv.messages) - 1


def test_54_halt_is_data_for_the_caller_not_a_finish_reason() -> None:
    # Dropping tool calls from the final reply is the agent loop's job; the
    # library gives the note and the public object, which names no finish_reason.
    conv = Conversation()
    _after_block(conv)
    _, decision = conv.pending([("read", {"path": "a"})])
    assert decision.verdict is not None
    public = decision.verdict.to_public_dict()
    assert public["level"] == "halt" and "finish_reason" not in public
    note = final_answer_note(decision.verdict)
    assert "No more tools" in note and "what kept you" in note


def test_55_cycle_with_a_poll_uses_the_polling_budget() -> None:
    # The verdict stays a `cycle` (it is one), with the polling ladder and
    # `polling=True`, and its nudge advises backing off.
    conv = Conversation()
    for _ in range(4):
        conv.call("job_status", {"id": "j"}, "running")
        conv.call("read", {"path": "log"}, "same log")
    no_verdict_so_far(conv)
    for _ in range(6):
        conv.call("job_status", {"id": "j"}, "running")
        verdict = conv.call("read", {"path": "log"}, "same log")
    verdict = expect(verdict, "cycle", "nudge", 10)
    assert verdict.polling and verdict.thresholds.nudge == 10
    assert "wait longer between checks" in verdict.message_to_model
    assert [v for v in conv.verdicts if v is not None] == [verdict]
