"""What the model is told (design §7.7): nudges, block results, the halt note.

Each text opens with a machine tag (``[loop-guard:...]``) so that the detector
can find its own earlier notes in the transcript, then says what was
repeated, the evidence, the consequence, a way out and what happens next.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolrelay.stuck.patterns import Measure
from toolrelay.stuck.records import Call, CallSpec
from toolrelay.stuck.verdict import Verdict

_ARGS_CHARS = 200
_RESULT_CHARS = 240
_WAY_OUT = "If you cannot make progress, give your final answer now and say what is blocking you."


def describe_call(name: str, canonical_args: str) -> str:
    args = canonical_args.removeprefix("RAW:")
    if len(args) > _ARGS_CHARS:
        args = args[: _ARGS_CHARS - 1] + "…"
    return f"{name}({args})" if args not in ("{}", "") else f"{name}()"


def _clip(text: str, limit: int = _RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _names(calls: Sequence[Call]) -> list[str]:
    seen: list[str] = []
    for call in calls:
        label = describe_call(call.name, call.spec.canonical_args)
        if label not in seen:
            seen.append(label)
    return seen


def _primary(measure: Measure) -> Call | None:
    return measure.evidence[-1] if measure.evidence else None


def _tag(measure: Measure) -> str:
    limit = measure.shown_ladder.block or measure.shown_ladder.halt_at or measure.count
    return f"[loop-guard:{measure.pattern} {measure.count}/{limit}]"


def _what_happens_next(measure: Measure) -> str:
    ladder = measure.shown_ladder
    block = ladder.block
    if block is not None:
        next_one = block == measure.count + 1
        if measure.pattern == "cycle":
            which = "the next cycle" if next_one else f"cycle {block}"
            return f"The call that would complete {which} will not be executed."
        if not next_one:
            return f"From call {block} on, this call will not be executed."
        if measure.pattern == "near_identical":
            return "The next variation of this call will not be executed."
        return "The next identical call will not be executed."
    halt = ladder.halt_at
    when = "again" if halt == measure.count + 1 else f"{halt} times"
    if measure.pattern == "unknown_tool":
        return f"Calling it {when} will stop the run."
    if measure.pattern == "monologue":
        return f"Writing it {when} will stop the run."
    return f"After {halt} failures in a row the run will stop."


def nudge_text(measure: Measure, declared_tools: Sequence[str]) -> str:
    """The note appended to the last tool result of the round that tripped a pattern."""
    call = _primary(measure)
    what = describe_call(call.name, call.spec.canonical_args) if call else ""
    result = _clip(call.result_excerpt) if call else ""
    error = call.error_excerpt if call and call.error_excerpt else ""
    n = measure.count
    pattern = measure.pattern
    if pattern == "identical_call":
        lines = [
            f"You have called {what} {n} times in a row and got the same result each time:",
            f"  {result}",
            "Calling it again will return the same thing. Use the result you already have, "
            "or try a different tool or different arguments.",
        ]
    elif pattern == "side_effect_repeat":
        lines = [
            f"{what} changes something outside this conversation, and you have already run it "
            f"{n} times with the same arguments and the same outcome:",
            f"  {result}",
            "The action is done; running it again would only repeat its effect.",
        ]
    elif pattern == "identical_error":
        lines = [
            f"{what} has failed {n} times in a row with the same error:",
            f"  {error}",
            "It will fail the same way again. Fix the arguments the error points at, "
            "or use another tool.",
        ]
    elif pattern == "repeated_error":
        lines = [
            f"{call.name if call else 'This tool'} has failed {n} times in a row with the same "
            "error, even with different arguments:",
            f"  {error}",
            "Changing the arguments does not help; this needs another approach or another tool.",
        ]
    elif pattern == "error_streak":
        lines = [
            f"Your last {n} tool calls all failed. The most recent error:",
            f"  {error}",
            "Stop and read the errors: check the tool names and the required arguments "
            "before calling anything else.",
        ]
    elif pattern == "unknown_tool":
        valid = ", ".join(declared_tools) if declared_tools else "the tools declared to you"
        lines = [
            f"There is no tool named {call.name if call else 'like that'!s}; "
            f"you have tried it {n} times.",
            f"The tools you can call are: {valid}.",
        ]
    elif pattern == "cycle":
        steps = " -> ".join(_names(measure.evidence[: measure.period or 0]))
        lines = [
            f"You are going round in a circle ({steps}) and have completed it {n} times; "
            "every step returns what it returned the time before.",
            "Nothing changes between cycles. Decide using the results you already have.",
        ]
        if measure.polling:
            lines.append(
                "If you are waiting for a job, wait longer between checks "
                "or report its current status."
            )
    elif pattern == "near_identical":
        lines = [
            f"You have called {call.name if call else 'this tool'} {n} times with small "
            f"variations of the same arguments (latest: {what}) and got the same result each time:",
            f"  {result}",
            "Small variations of the same call give the same result; change your approach.",
        ]
    elif pattern == "identical_call_changing_result":
        lines = [
            f"You have called {what} {n} times in a row. Its output changes, but repeating "
            "the call is not moving the task forward.",
            "Work with the output you have, or explain why you need to call it again.",
        ]
    elif pattern == "polling_no_progress":
        lines = [
            f"You have checked {what} {n} times and the answer has not changed:",
            f"  {result}",
            "Wait longer between checks, or report the current status to the user.",
        ]
    else:  # monologue (empty_round only halts)
        lines = [
            f"You have written the same message {n} times without calling a tool:",
            f"  {_clip(measure.text_excerpt or '')}",
            "Repeating it does not move the task forward. Call a tool or give your final answer.",
        ]
    return "\n".join([_tag(measure), *lines, _WAY_OUT, _what_happens_next(measure)])


def block_text(measure: Measure, blocked: CallSpec) -> str:
    """The synthetic result given for a call the detector refused to run."""
    call = _primary(measure)
    what = describe_call(blocked.name, blocked.canonical_args)
    pointer = f" (see the result of call {call.spec.call_id} above)" if call is not None else ""
    reason = {
        "identical_call": f"it already ran {measure.count - 1} times in a row with the same result",
        "side_effect_repeat": "it already ran with the same arguments and its effect is done",
        "identical_error": f"it already failed {measure.count - 1} times with the same error",
        "cycle": "it would complete another turn of a cycle in which nothing changes",
        "near_identical": "variations of this call keep returning the same result",
        "identical_call_changing_result": f"it already ran {measure.count - 1} times in a row",
        "polling_no_progress": f"the last {measure.count - 1} checks all returned the same answer",
    }.get(measure.pattern, "it repeats a loop")
    return (
        f"[loop-guard:blocked {measure.pattern}] NOT EXECUTED: {what} was not run because "
        f"{reason}{pointer}. Running it again would not change anything. Use the results you "
        "have, change your approach, or give your final answer and say what is blocking you. "
        "If you request this call again, the run will stop."
    )


def poll_budget_text(made: int, cap: int, blocked: CallSpec) -> str:
    """The synthetic result of a poll past the turn's ``max_poll_calls``."""
    what = describe_call(blocked.name, blocked.canonical_args)
    return (
        f"[loop-guard:blocked poll_budget] NOT EXECUTED: {what} was not run because this turn "
        f"already made {made} status checks, the most one turn may make ({cap}). Report the "
        "current status to the user, or give your final answer and say what you are waiting for."
    )


def rewind_text(verdict: Verdict) -> str:
    """The note left on the one round a rewind keeps of a loop."""
    limit = verdict.thresholds.block or verdict.thresholds.halt_at or verdict.count
    calls = ", ".join(describe_call(call.name, call.canonical_args) for call in verdict.calls)
    return (
        f"[loop-guard:{verdict.pattern} {verdict.count}/{limit}]\n"
        f"You requested {calls or 'the same calls'} {verdict.count} times and nothing changed "
        "("
        + verdict.pattern.replace("_", " ")
        + "). The repeats were taken out of this conversation: the result above is what they "
        "returned. Running it again will not change anything.\n"
        f"{_WAY_OUT}\nIf you request it again, it will not be executed."
    )


def halt_text(pattern: str, count: int, call_description: str | None) -> str:
    """The note for the last, tools-free answer after a loop has been stopped."""
    if pattern == "monologue":
        what = f"you wrote the same message {count} times"
    elif pattern == "empty_round":
        what = f"your last {count} replies were empty"
    elif pattern == "error_streak":
        what = f"your last {count} tool calls all failed"
    elif pattern == "cycle":
        what = f"you went round the same cycle of calls {count} times without any change"
    elif pattern == "poll_budget":
        what = f"you made {count} status checks in this turn, the most one turn may make"
    elif call_description is not None:
        what = (
            f"you called {call_description} {count} times without making progress "
            f"({pattern.replace('_', ' ')})"
        )
    else:
        what = f"you repeated the same step {count} times"
    return (
        f"[loop-guard:halt {pattern}] The tool loop has been stopped because {what}. "
        "No more tools are available. Using only the information already in this "
        "conversation, give the best final answer you can, and say plainly what kept you "
        "from making progress."
    )
