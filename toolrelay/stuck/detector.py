"""The detector's entry points: the agent loop's two checks and the gateway's one.

Everything is recomputed from the transcript on every call. What the detector
did before (a nudge, a block) is read back from its tagged notes, so a check is
a pure function of ``(messages, pending, config, tools)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolrelay.stuck import normalize, similarity, transcript
from toolrelay.stuck.config import Ladder, StuckConfig
from toolrelay.stuck.messages import (
    block_text,
    describe_call,
    halt_text,
    nudge_text,
    poll_budget_text,
    rewind_text,
)
from toolrelay.stuck.patterns import (
    Finding,
    Measure,
    Rung,
    best,
    cycle_measure,
    error_streak_measure,
    near_identical_measure,
    repeat_measures,
    repeated_error_measure,
    resolve_after_round,
    resolve_pending,
    text_turn_measures,
    unknown_tool_measure,
)
from toolrelay.stuck.records import CallSpec, Round, ToolCatalog, Window
from toolrelay.stuck.transcript import (
    CallReader,
    call_id_of,
    call_reader,
    read_window,
    text_of,
    tool_calls_of,
    window_start,
)
from toolrelay.stuck.verdict import CallAction, Decision, InvolvedCall, Level, Verdict
from toolrelay.types import ToolSpec

Tools = Sequence[Mapping[str, Any] | str | ToolSpec]

_SUGGESTIONS: dict[str, tuple[str, ...]] = {
    "identical_call": ("use_previous_result", "change_arguments", "final_answer"),
    "side_effect_repeat": ("do_not_repeat_action", "final_answer"),
    "identical_error": ("fix_arguments", "use_another_tool", "final_answer"),
    "repeated_error": ("change_approach", "use_another_tool", "final_answer"),
    "error_streak": ("check_tool_names_and_arguments", "final_answer"),
    "unknown_tool": ("use_declared_tool", "final_answer"),
    "cycle": ("decide_from_results", "final_answer"),
    "near_identical": ("change_approach", "final_answer"),
    "identical_call_changing_result": ("use_current_output", "final_answer"),
    "polling_no_progress": ("back_off", "report_status"),
    "monologue": ("call_a_tool", "final_answer"),
    "empty_round": ("final_answer",),
}
# Broad patterns whose nudge would only repeat what a narrower nudge about the
# same calls already said (four failures after "same error three times").
_COVERED_BY: dict[str, tuple[str, ...]] = {
    "error_streak": ("identical_error", "repeated_error", "unknown_tool"),
    "identical_call_changing_result": ("identical_call",),
}
_HALT_SUGGESTIONS = ("final_answer_without_tools",)
_NOTE_SEPARATOR = "\n\n"


_OBSERVED: dict[Rung, Level] = {
    "nudge": "would_nudge",
    "block": "would_block",
    "halt": "would_halt",
}


def _level(rung: Rung, config: StuckConfig) -> Level:
    return _OBSERVED[rung] if config.mode == "observe" else rung


def _involved(measure: Measure) -> tuple[InvolvedCall, ...]:
    seen: dict[str, InvolvedCall] = {}
    specs = [call.spec for call in measure.evidence] + list(measure.pending)
    for spec in specs:
        seen.setdefault(spec.sig, InvolvedCall(spec.name, spec.sig, spec.canonical_args))
    return tuple(seen.values())


def _primary_spec(measure: Measure) -> CallSpec | None:
    if measure.evidence:
        return measure.evidence[-1].spec
    return measure.pending[0] if measure.pending else None


def _verdict(
    finding: Finding,
    config: StuckConfig,
    message: str,
    blocked_call_ids: tuple[str, ...] = (),
) -> Verdict:
    measure = finding.measure
    primary = _primary_spec(measure)
    last_call = measure.evidence[-1] if measure.evidence else None
    involved = _involved(measure)
    return Verdict(
        pattern=measure.pattern,
        level=_level(finding.rung, config),
        mode=config.mode,
        count=measure.count,
        thresholds=measure.shown_ladder,
        tool_names=tuple(dict.fromkeys(call.name for call in involved)),
        calls=involved,
        signature=primary.sig if primary else None,
        canonical_args=primary.canonical_args if primary else None,
        result_excerpt=last_call.result_excerpt if last_call else measure.text_excerpt,
        error_excerpt=last_call.error_excerpt if last_call else None,
        first_index=measure.loop_start_index,
        last_index=measure.last_index,
        loop_start_index=measure.loop_start_index,
        blocked_call_ids=blocked_call_ids,
        message_to_model=message,
        suggested_actions=_HALT_SUGGESTIONS
        if finding.rung == "halt"
        else _SUGGESTIONS[measure.pattern],
        period=measure.period,
        polling=measure.polling,
    )


def _halt_note(measure: Measure) -> str:
    primary = _primary_spec(measure)
    description = describe_call(primary.name, primary.canonical_args) if primary else None
    return halt_text(measure.pattern, measure.count, description)


def _measures_after_round(window: Window, config: StuckConfig) -> list[Measure]:
    """Every pattern's progress, for the round (or text turn) that ends the window."""
    if not window.steps:
        return []
    if not isinstance(window.steps[-1], Round):
        return text_turn_measures(window, config)
    rounds = window.rounds
    last = rounds[-1]
    measures: list[Measure] = []
    for call in last.calls:
        measures.extend(repeat_measures(rounds, call.spec, config, pending=False))
    for name in dict.fromkeys(call.name for call in last.calls if call.unknown_tool):
        measures.extend(unknown_tool_measure(window, name, config, None))
    measures.extend(repeated_error_measure(rounds, config))
    measures.extend(error_streak_measure(rounds, config))
    measures.extend(cycle_measure(rounds, config, ()))
    measures.extend(near_identical_measure(rounds, config, ()))
    return measures


def _already_nudged(window: Window, measure: Measure, config: StuckConfig) -> bool:
    # Observe mode writes nothing into the transcript, so "nudged before" is
    # read from the count: the nudge would have gone out at its threshold.
    if config.mode == "observe":
        nudge = measure.ladder.nudge
        return nudge is not None and measure.progress > nudge
    return any(
        window.nudged_since(pattern, measure.loop_start_index)
        for pattern in (measure.pattern, *_COVERED_BY.get(measure.pattern, ()))
    )


class StuckDetector:
    """The agent loop's detector: ``check_pending`` before a round runs, ``check_round`` after.

    ``tools`` (the OpenAI ``tools`` array, or tool names) is optional; with it,
    calls to undeclared names are recognised without waiting for their errors,
    namespaced names resolve, and arguments equal to schema defaults are ignored.
    """

    def __init__(self, config: StuckConfig | None = None) -> None:
        self.config = config or StuckConfig()

    def check_pending(
        self,
        messages: Sequence[Any],
        pending_assistant: Mapping[str, Any],
        tools: Tools | None = None,
    ) -> Decision:
        """Which calls of the assistant message about to run may run."""
        config = self.config
        if config.mode == "off":
            return Decision(
                per_call={
                    call_id_of(raw, position): "run"
                    for position, raw in enumerate(tool_calls_of(pending_assistant))
                }
            )
        catalog = ToolCatalog.from_tools(tools)
        reader = call_reader(config, catalog)
        specs = reader.read_all(pending_assistant, len(messages))
        run_all: dict[str, CallAction] = {spec.call_id: "run" for spec in specs}
        if not specs:
            return Decision(per_call=run_all)
        over_budget = _poll_budget(messages, specs, reader, config)
        if over_budget is not None:
            return over_budget
        window = read_window(messages, reader)
        distinct = list({spec.sig: spec for spec in reversed(specs)}.values())[::-1]
        findings: list[Finding] = []
        for spec in distinct:
            measures = repeat_measures(window.rounds, spec, config, pending=True)
            known_unknown = any(
                call.unknown_tool and call.name == spec.name
                for round_ in window.rounds
                for call in round_.calls
            )
            if spec.declared is False or known_unknown:
                measures.extend(unknown_tool_measure(window, spec.name, config, spec))
            findings.extend(_findings_pending(measures))
        findings.extend(_findings_pending(cycle_measure(window.rounds, config, distinct)))
        findings.extend(_findings_pending(near_identical_measure(window.rounds, config, distinct)))
        chosen = best(findings)
        if chosen is None:
            return Decision(per_call=run_all)
        blocked_sigs: dict[str, Finding] = {}
        for finding in sorted(findings, key=lambda f: f.rank, reverse=True):
            for spec in finding.measure.pending:
                blocked_sigs[spec.sig] = finding
        halt = chosen.rung == "halt"
        blocked = [spec for spec in specs if halt or spec.sig in blocked_sigs]
        texts = {
            spec.call_id: block_text((chosen if halt else blocked_sigs[spec.sig]).measure, spec)
            for spec in blocked
        }
        blocked_ids = tuple(spec.call_id for spec in blocked)
        message = _halt_note(chosen.measure) if halt else texts[blocked_ids[0]]
        verdict = _verdict(chosen, config, message, blocked_ids)
        if config.mode == "observe":
            return Decision(per_call=run_all, verdict=verdict)
        per_call: dict[str, CallAction] = {
            spec.call_id: "block" if spec.call_id in texts else "run" for spec in specs
        }
        return Decision(per_call=per_call, verdict=verdict, blocked_texts=texts)

    def check_round(self, messages: Sequence[Any], tools: Tools | None = None) -> Verdict | None:
        """After a round's results are appended: a nudge to attach, a halt, or nothing."""
        config = self.config
        if config.mode == "off":
            return None
        catalog = ToolCatalog.from_tools(tools)
        window = read_window(messages, call_reader(config, catalog))
        findings = []
        for measure in _measures_after_round(window, config):
            rung = resolve_after_round(measure, _already_nudged(window, measure, config))
            if rung is not None:
                findings.append(Finding(measure, rung))
        chosen = best(findings)
        if chosen is None:
            return None
        if chosen.rung == "halt":
            message = _halt_note(chosen.measure)
        else:
            message = nudge_text(chosen.measure, catalog.names)
        return _verdict(chosen, config, message)


def _poll_budget(
    messages: Sequence[Any], specs: Sequence[CallSpec], reader: CallReader, config: StuckConfig
) -> Decision | None:
    """A halt when the pending polls would take the turn past ``max_poll_calls``.

    Polls that make progress are never a loop, so only this cap ends them; it
    counts the whole turn (since the last real user message), not the window.
    """
    cap = config.max_poll_calls
    polls = [spec for spec in specs if spec.polling]
    if cap is None or not polls:
        return None
    start = window_start(messages, len(messages) + 1)
    made = sum(
        spec.polling
        for index in range(start, len(messages))
        if isinstance(messages[index], Mapping) and messages[index].get("role") == "assistant"
        for spec in reader.read_all(messages[index], index)
    )
    if made + len(polls) <= cap:
        return None
    first = polls[0]
    texts = {spec.call_id: poll_budget_text(made, cap, spec) for spec in specs}
    ids = tuple(texts)
    verdict = Verdict(
        pattern="poll_budget",
        level=_level("halt", config),
        mode=config.mode,
        count=made + len(polls),
        thresholds=Ladder(halt=cap),
        tool_names=tuple(dict.fromkeys(spec.name for spec in polls)),
        calls=tuple(
            {
                spec.sig: InvolvedCall(spec.name, spec.sig, spec.canonical_args) for spec in polls
            }.values()
        ),
        signature=first.sig,
        canonical_args=first.canonical_args,
        result_excerpt=None,
        error_excerpt=None,
        first_index=start,
        last_index=max(len(messages) - 1, start),
        loop_start_index=start,
        blocked_call_ids=ids,
        message_to_model=halt_text("poll_budget", made, describe_call(first.name, "")),
        suggested_actions=_HALT_SUGGESTIONS,
        polling=True,
    )
    if config.mode == "observe":
        return Decision(per_call={spec.call_id: "run" for spec in specs}, verdict=verdict)
    return Decision(per_call=dict.fromkeys(ids, "block"), verdict=verdict, blocked_texts=texts)


def _findings_pending(measures: Sequence[Measure]) -> list[Finding]:
    findings = []
    for measure in measures:
        rung = resolve_pending(measure)
        if rung is not None:
            findings.append(Finding(measure, rung))
    return findings


def gateway_verdict(
    messages: Sequence[Any],
    config: StuckConfig | None = None,
    tools: Tools | None = None,
) -> Verdict | None:
    """Proxy mode: is the client's agent stuck in a loop right now?

    The client runs the tools, so the gateway cannot nudge or block a call; it
    can only answer without tools. It therefore declares a loop at each
    pattern's first threshold (for identical calls: the third identical call
    with the same result) and reports it with level ``halt``.
    """
    config = config or StuckConfig()
    if config.mode == "off" or not _turn_in_window(messages, config):
        return None
    return _window_verdict(messages, config, tools)


def _turn_in_window(messages: Sequence[Any], config: StuckConfig) -> bool:
    """Whether the window holds an assistant turn. Without one no pattern has
    progress, and the window need not be read: a first request, and every
    request that ends with the user's own message, are most of the traffic."""
    start = window_start(messages, config.window_max_calls)
    return any(
        isinstance(message, (dict, Mapping)) and message.get("role") == "assistant"
        for message in messages[start:]
    )


def _window_verdict(
    messages: Sequence[Any], config: StuckConfig, tools: Tools | None
) -> Verdict | None:
    """:func:`gateway_verdict` read from the window, every time."""
    window = read_window(messages, call_reader(config, ToolCatalog.from_tools(tools)))
    findings = []
    for measure in _measures_after_round(window, config):
        ladder = measure.ladder
        first = ladder.nudge or ladder.block or ladder.halt_at
        if first is not None and measure.progress >= first:
            findings.append(Finding(measure, "halt"))
    chosen = best(findings)
    if chosen is None:
        return None
    return replace(_verdict(chosen, config, _halt_note(chosen.measure)), table="gateway")


def final_answer_note(verdict: Verdict) -> str:
    """The note asking for a final, tools-free answer after ``verdict``'s loop."""
    primary = next((call for call in verdict.calls if call.signature == verdict.signature), None)
    description = describe_call(primary.name, primary.canonical_args) if primary else None
    return halt_text(verdict.pattern, verdict.count, description)


def append_note(messages: Sequence[Mapping[str, Any]], note: str) -> list[dict[str, Any]]:
    """A copy of ``messages`` carrying ``note`` where every chat template accepts it.

    The note goes at the end of the last tool result when the conversation
    ends with one (no extra turn, valid role order), else into a new user
    message. The input is not modified.
    """
    copied = [dict(message) for message in messages]
    if copied and copied[-1].get("role") == "tool":
        last = copied[-1]
        content = last.get("content")
        if isinstance(content, list):
            last["content"] = [*content, {"type": "text", "text": _NOTE_SEPARATOR + note}]
        else:
            last["content"] = text_of(content) + _NOTE_SEPARATOR + note
        return copied
    copied.append({"role": "user", "content": note})
    return copied


def apply_nudge(messages: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[dict[str, Any]]:
    """``messages`` with the nudge of an enforced ``nudge`` verdict attached (design §7.6)."""
    if verdict.level != "nudge":
        return [dict(message) for message in messages]
    return append_note(messages, verdict.message_to_model)


def rewind(messages: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[dict[str, Any]]:
    """``enforce_action="rewind"`` at a block: the looping suffix cut to its first round.

    The conversation is kept up to the round that started the loop
    (``verdict.loop_start_index``): that call and its results stay, with a
    note saying that its repeats were taken out and what they all returned.
    The pending, blocked assistant message is dropped rather than answered.
    It saves a small-window model the context the loop took. The detector's
    counts start again from that one round, so a caller rewinds once per turn
    and blocks as usual after that.
    """
    start = verdict.loop_start_index
    if not 0 <= start < len(messages) or not tool_calls_of(messages[start]):
        return append_note(messages, verdict.message_to_model)
    end = start + 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return append_note(messages[:end], rewind_text(verdict))


def name_saturation(
    messages: Sequence[Any], config: StuckConfig | None = None, last: int = 10, at_least: int = 8
) -> str | None:
    """Info only, never enforced: the tool name behind most of the latest calls.

    Batches (reading ten files) are legitimate, so this is a signal for logs
    and threshold tuning, not a verdict.
    """
    config = config or StuckConfig()
    window = read_window(messages, call_reader(config, ToolCatalog()))
    names = [call.name for round_ in window.rounds for call in round_.calls][-last:]
    if len(names) < at_least:
        return None
    top = max(sorted(set(names)), key=names.count)
    return top if names.count(top) >= at_least else None


def clear_caches() -> None:
    """Forget every memoised signature, fingerprint and reader.

    Checks give the same answers either way; this is for benchmarks that
    measure the cold path and for callers that want the memory back.
    """
    for memo in (
        normalize._canonical_arguments,
        normalize._result_fingerprint,
        normalize._error_fingerprint,
        similarity._loose_form,
        similarity._memo_features,
        transcript._matches_any,
        transcript._outcome,
        transcript.call_reader,
    ):
        memo.cache_clear()
