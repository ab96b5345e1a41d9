"""The loop patterns (design §7.4), each measured over a window.

A measurement says how far a pattern has progressed (``progress``) against its
ladder. Whether that means nudge, block or halt is decided in one place
(``resolve_after_round`` / ``resolve_pending``), so every pattern escalates
the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from toolrelay.stuck.config import Ladder, StuckConfig
from toolrelay.stuck.records import Call, CallSpec, Round, TextTurn, Window
from toolrelay.stuck.similarity import loose_form, similar

Rung = Literal["nudge", "block", "halt"]

# Highest first (§7.4); empty_round is last because only the streaming
# fallback produces it and nothing else can fire on an empty round.
PRIORITY: tuple[str, ...] = (
    "unknown_tool",
    "identical_error",
    "side_effect_repeat",
    "identical_call",
    "cycle",
    "repeated_error",
    "near_identical",
    "identical_call_changing_result",
    "polling_no_progress",
    "error_streak",
    "monologue",
    "empty_round",
)
_SEVERITY: dict[Rung, int] = {"nudge": 0, "block": 1, "halt": 2}
_PERIODS = (2, 3, 4)


@dataclass(frozen=True)
class Measure:
    """How far one pattern has got, and the evidence for it."""

    pattern: str
    progress: int
    # The ladder in the unit of ``progress`` (calls, for cycles) ...
    ladder: Ladder
    # ... and in the unit shown to people (full cycles, for cycles).
    count: int
    shown_ladder: Ladder
    evidence: tuple[Call, ...] = ()
    pending: tuple[CallSpec, ...] = ()
    loop_start_index: int = 0
    last_index: int = 0
    period: int | None = None
    polling: bool = False
    text_excerpt: str | None = None


@dataclass(frozen=True)
class Finding:
    measure: Measure
    rung: Rung

    @property
    def rank(self) -> tuple[int, int]:
        """Sort key: the most severe rung first, then the design's priority."""
        return (-_SEVERITY[self.rung], PRIORITY.index(self.measure.pattern))


def best(findings: Sequence[Finding]) -> Finding | None:
    return min(findings, key=lambda finding: finding.rank, default=None)


def resolve_after_round(measure: Measure, already_nudged: bool) -> Rung | None:
    ladder = measure.ladder
    halt_at = ladder.halt_at
    if halt_at is not None and measure.progress >= halt_at:
        return "halt"
    below_block = ladder.block is None or measure.progress < ladder.block
    if (
        ladder.nudge is not None
        and measure.progress >= ladder.nudge
        and below_block
        and not already_nudged
    ):
        return "nudge"
    return None


def resolve_pending(measure: Measure) -> Rung | None:
    ladder = measure.ladder
    halt_at = ladder.halt_at
    if halt_at is not None and measure.progress >= halt_at:
        return "halt"
    if ladder.block is not None and measure.progress >= ladder.block:
        return "block"
    return None


def _simple(
    pattern: str,
    ladder: Ladder,
    evidence: Sequence[Call],
    pending: Sequence[CallSpec] = (),
    polling: bool = False,
) -> Measure:
    progress = len(evidence) + (1 if pending else 0)
    return Measure(
        pattern=pattern,
        progress=progress,
        ladder=ladder,
        count=progress,
        shown_ladder=ladder,
        evidence=tuple(evidence),
        pending=tuple(pending),
        loop_start_index=evidence[0].spec.message_index if evidence else 0,
        last_index=evidence[-1].result_index if evidence else 0,
        polling=polling,
    )


# ------------------------------------------------------- per-signature runs


def sig_run(rounds: Sequence[Round], sig: str) -> list[Call]:
    """The calls with ``sig`` in the run of identical rounds that ends the window.

    Rounds are compared by the set of calls they make, so a call repeated next
    to a different call each time (edit x1 + test, edit x2 + test) is not
    repeated "in a row", just as it would not be if the calls came one by one.
    """
    run: list[Call] = []
    expected: frozenset[str] | None = None
    for round_ in reversed(rounds):
        call = round_.call_for(sig)
        if call is None or (expected is not None and round_.sigs != expected):
            break
        expected = round_.sigs
        run.append(call)
    run.reverse()
    return run


def _same_outcome_tail(run: Sequence[Call]) -> list[Call]:
    if not run:
        return []
    last = run[-1].outcome
    tail: list[Call] = []
    for call in reversed(run):
        if call.outcome != last:
            break
        tail.append(call)
    tail.reverse()
    return tail


def _successful_tail(run: Sequence[Call]) -> list[Call]:
    tail: list[Call] = []
    for call in reversed(run):
        if call.is_error:
            break
        tail.append(call)
    tail.reverse()
    return tail


def repeat_measures(
    rounds: Sequence[Round], spec: CallSpec, config: StuckConfig, pending: bool
) -> list[Measure]:
    """identical_call and its variants (error, side effect, polling, changing result)."""
    run = sig_run(rounds, spec.sig)
    if not run:
        return []
    thresholds = config.thresholds
    pending_specs = (spec,) if pending else ()
    measures: list[Measure] = []
    tail = _same_outcome_tail(run)
    if tail[-1].is_error:
        # Errors are never exempt, polling or not (§7.5 rule 4).
        measures.append(_simple("identical_error", thresholds.identical_error, tail, pending_specs))
    elif spec.polling:
        measures.append(
            _simple(
                "polling_no_progress",
                thresholds.polling_no_progress,
                tail,
                pending_specs,
                polling=True,
            )
        )
    elif spec.side_effect:
        measures.append(
            _simple("side_effect_repeat", thresholds.side_effect_repeat, tail, pending_specs)
        )
    else:
        measures.append(_simple("identical_call", thresholds.identical_call, tail, pending_specs))
    # A polling call whose result changes is making progress (§7.5 rule 2);
    # failures belong to the error patterns.
    successes = _successful_tail(run)
    if not spec.polling and len({call.result_fp for call in successes}) > 1:
        measures.append(
            _simple(
                "identical_call_changing_result",
                thresholds.identical_call_changing_result,
                successes,
                pending_specs,
            )
        )
    return measures


# ------------------------------------------------------------------ errors


def repeated_error_measure(rounds: Sequence[Round], config: StuckConfig) -> list[Measure]:
    """The same tool failing the same way, whatever its arguments."""
    if not rounds:
        return []
    measures = []
    for call in rounds[-1].calls:
        if not call.is_error:
            continue
        run: list[Call] = []
        for round_ in reversed(rounds):
            match = next(
                (
                    other
                    for other in round_.calls
                    if other.is_error
                    and other.name == call.name
                    and other.error_fp == call.error_fp
                ),
                None,
            )
            if match is None:
                break
            run.append(match)
        run.reverse()
        measures.append(_simple("repeated_error", config.thresholds.repeated_error, run))
    return measures


def error_streak_measure(rounds: Sequence[Round], config: StuckConfig) -> list[Measure]:
    """Every call failing, across tools and errors.

    Blocked calls are left out: they fail by the detector's hand, not the tool's.
    """
    executed = [call for round_ in rounds for call in round_.calls if not call.blocked]
    streak: list[Call] = []
    for call in reversed(executed):
        if not call.is_error:
            break
        streak.append(call)
    if not streak:
        return []
    streak.reverse()
    return [_simple("error_streak", config.thresholds.error_streak, streak)]


def unknown_tool_measure(
    window: Window, name: str, config: StuckConfig, pending: CallSpec | None
) -> list[Measure]:
    """The same undeclared tool name, counted across the turn."""
    calls = [
        call for r in window.rounds for call in r.calls if call.unknown_tool and call.name == name
    ]
    if pending is None and not calls:
        return []
    return [
        _simple(
            "unknown_tool", config.thresholds.unknown_tool, calls, (pending,) if pending else ()
        )
    ]


# ------------------------------------------------------------------ cycles


def _cycle_length(keys: Sequence[object], period: int) -> int:
    """How many trailing rounds follow ``period``: k plus every round equal to k back."""
    if len(keys) < period:
        return 0
    length = period
    position = len(keys) - 1
    while position - period >= 0 and keys[position] == keys[position - period]:
        length += 1
        position -= 1
    return length


def cycle_measure(
    rounds: Sequence[Round], config: StuckConfig, pending: Sequence[CallSpec]
) -> list[Measure]:
    """A strict cycle of rounds of period 2-4, same calls and same results per position."""
    keys = [round_.key for round_ in rounds]
    measures: list[Measure] = []
    for period in _PERIODS:
        length = _cycle_length(keys, period)
        block = keys[len(keys) - period :]
        # One repeated round is identical_call's business, and A-B-A-B is a
        # period-2 cycle however many times it is read as period 4.
        if length < period or len(set(block)) < 2 or _has_shorter_period(block):
            continue
        if pending:
            if frozenset(spec.sig for spec in pending) != rounds[len(rounds) - period].sigs:
                continue
            length += 1
        elif length < 2 * period:
            continue
        start_round = len(rounds) - length + (1 if pending else 0)
        involved = rounds[start_round:]
        polling = any(call.spec.polling for r in involved for call in r.calls)
        cycles = config.thresholds.polling_no_progress if polling else config.thresholds.cycle
        measures.append(
            Measure(
                pattern="cycle",
                progress=length,
                ladder=_in_calls(cycles, period),
                count=length // period,
                shown_ladder=cycles,
                evidence=tuple(call for r in involved for call in r.calls),
                pending=tuple(pending),
                loop_start_index=involved[0].message_index,
                last_index=involved[-1].last_index,
                period=period,
                polling=polling,
            )
        )
    return measures


def _has_shorter_period(block: Sequence[object]) -> bool:
    size = len(block)
    return any(
        size % shorter == 0 and all(block[i] == block[i - shorter] for i in range(shorter, size))
        for shorter in range(2, size)
    )


def _in_calls(cycles: Ladder, period: int) -> Ladder:
    """A ladder counted in full cycles, converted to calls.

    Nudge and block fall on the call that completes the cycle; a halt, unless
    configured, on the very next call of the cycle after a block.
    """
    block = None if cycles.block is None else cycles.block * period
    halt = None if cycles.halt is None else cycles.halt * period
    nudge = None if cycles.nudge is None else cycles.nudge * period
    return Ladder(nudge=nudge, block=block, halt=halt)


# ---------------------------------------------------------- near-identical


def near_identical_measure(
    rounds: Sequence[Round], config: StuckConfig, pending: Sequence[CallSpec]
) -> list[Measure]:
    """Small variations of one read-only call, all returning the same result."""
    if pending and len({spec.sig for spec in pending}) != 1:
        return []
    keys = config.command_arg_keys
    threshold = config.near_identical_similarity
    forms: list[str] = []
    if pending:
        anchor_spec = pending[0]
        forms.append(loose_form(anchor_spec.canonical_args, keys))
    else:
        if not rounds or len(rounds[-1].calls) != 1:
            return []
        anchor_spec = rounds[-1].calls[0].spec
    if anchor_spec.mutating or anchor_spec.side_effect or anchor_spec.polling:
        return []
    run: list[Call] = []
    for round_ in reversed(rounds):
        if len(round_.calls) != 1:
            break
        call = round_.calls[0]
        form = loose_form(call.spec.canonical_args, keys)
        if (
            call.name != anchor_spec.name
            or call.is_error
            or (run and call.result_fp != run[0].result_fp)
            or not all(similar(form, other, threshold) for other in forms)
        ):
            break
        run.append(call)
        forms.append(form)
    run.reverse()
    sigs = {call.sig for call in run} | {spec.sig for spec in pending}
    if len(sigs) < 2:
        return []
    return [_simple("near_identical", config.thresholds.near_identical, run, pending)]


# --------------------------------------------------------------- text turns


def _trailing_turns(window: Window) -> list[TextTurn]:
    turns: list[TextTurn] = []
    for step in reversed(window.steps):
        if not isinstance(step, TextTurn):
            break
        turns.append(step)
    turns.reverse()
    return turns


def text_turn_measures(window: Window, config: StuckConfig) -> list[Measure]:
    """monologue (same text again and again) and empty_round (nothing at all)."""
    turns = _trailing_turns(window)
    if not turns:
        return []
    last = turns[-1].text
    same: list[TextTurn] = []
    for turn in reversed(turns):
        if turn.text != last:
            break
        same.append(turn)
    same.reverse()
    pattern = "monologue" if last else "empty_round"
    ladder = config.thresholds.monologue if last else config.thresholds.empty_round
    return [
        Measure(
            pattern=pattern,
            progress=len(same),
            ladder=ladder,
            count=len(same),
            shown_ladder=ladder,
            loop_start_index=same[0].index,
            last_index=same[-1].index,
            text_excerpt=same[-1].excerpt or None,
        )
    ]
