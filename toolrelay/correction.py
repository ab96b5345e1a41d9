"""Self-repair of a round's tool calls: which calls stand, and what the model is told.

A round's calls are checked against the declared tools' schemas
(:mod:`toolrelay.validate`); together with the calls the parser rejected
(an unknown or ambiguous name, arguments that are not an object) the invalid
ones are the round's *problems*. The gateway then asks the model once more
with :func:`correction_messages`: the conversation, the model's own attempt as
an assistant message, and a short directive naming each problem. The calls
that were valid stand; the re-ask is asked for the corrected calls only, and
a repeat of a call that already stands is not taken twice
(:func:`new_calls`).

Pure: the gateway's round code does the asking (toolrelay.io.backends).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from mypy_extensions import mypyc_attr

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.names import ToolSet
from toolrelay.repair import json_text
from toolrelay.validate import validate_call

# Starts the directive of a re-ask, so that a model double (toolrelay
# simulate) and a log reader can tell it from what the user wrote.
CORRECTION_MARKER = "[TOOL CALL ERRORS]"
# The directive's fixed lines: a weak model copies them into later answers.
CORRECTION_HEADER = f"{CORRECTION_MARKER} Some tool calls in your last reply cannot be run:"
CORRECTION_TAIL = (
    "Write the corrected calls now, with the declared tool names and parameters "
    "exactly as specified, and nothing else."
)
# How toolrelay's own answer begins when no call could be used and the model
# wrote nothing else (:func:`nothing_usable`): a note, not the model's words.
NOTHING_USABLE = "(The model's tool calls could not be used: "


@dataclass(frozen=True)
class Problem:
    """A call that cannot be handed out as it is, and why."""

    # The tool's name as the model wrote it; None when it wrote none.
    name: str | None
    # The call as the model wrote it.
    written: str
    # What is wrong, in words a model can act on: "'city' is required".
    reason: str
    # The call as parsed, when its arguments are what is wrong; None for a
    # call the parser rejected (it has no usable name or arguments).
    call: ToolCall | None = None

    def __str__(self) -> str:
        return f"{self.name or 'a call without a tool name'}: {self.reason}"


@dataclass(frozen=True)
class CheckedCalls:
    """A round's calls sorted into those that stand and those that do not."""

    # Valid calls, with lossless coercions applied.
    accepted: tuple[ToolCall, ...]
    # How many of the accepted calls needed a coercion.
    coerced: int
    problems: tuple[Problem, ...]
    # Every call in order, the valid ones coerced, the invalid ones as they
    # came: what the ``warn`` setting passes on.
    passed: tuple[ToolCall, ...] = ()


def check_calls(
    calls: Iterable[ToolCall], rejected: Iterable[RejectedCall], tools: ToolSet
) -> CheckedCalls:
    """Check each call against its tool's schema; rejected calls are problems as they are."""
    accepted: list[ToolCall] = []
    passed: list[ToolCall] = []
    coerced = 0
    problems: list[Problem] = []
    for call in calls:
        checked, result = validate_call(call, tools.parameters(call.name))
        if result.ok:
            accepted.append(checked)
            passed.append(checked)
            coerced += bool(result.coercions)
        else:
            passed.append(call)
            problems.append(Problem(call.name, written_call(call), result.reason, call))
    problems.extend(Problem(r.name, r.raw, r.reason) for r in rejected)
    return CheckedCalls(tuple(accepted), coerced, tuple(problems), tuple(passed))


def written_call(call: ToolCall) -> str:
    """A call as one line of JSON, the way the gateway shows a model its attempt."""
    return json_text({"name": call.name, "arguments": call.arguments})


def correction_directive(problems: Sequence[Problem], accepted: Sequence[ToolCall]) -> str:
    """What the model is told: each problem on a line, then what to write."""
    lines = [CORRECTION_HEADER, *(f"- {problem}" for problem in problems)]
    if accepted:
        names = ", ".join(dict.fromkeys(call.name for call in accepted))
        lines.append(f"The other calls ({names}) were accepted: do not repeat them.")
    lines.append(CORRECTION_TAIL)
    return "\n".join(lines)


def correction_messages(
    messages: Sequence[Mapping[str, Any]],
    content: str | None,
    attempt: Sequence[str],
    problems: Sequence[Problem],
    accepted: Sequence[ToolCall],
) -> list[dict[str, Any]]:
    """The conversation for the re-ask: the model's attempt (its prose and each
    call as written, in ``attempt``) and the directive after it."""
    shown = "\n".join(part for part in (content, *attempt) if part)
    return [
        *(dict(message) for message in messages),
        {"role": "assistant", "content": shown},
        {"role": "user", "content": correction_directive(problems, accepted)},
    ]


def new_calls(calls: Iterable[ToolCall], standing: Iterable[ToolCall]) -> list[ToolCall]:
    """``calls`` without the ones that repeat a standing call (same name and arguments)."""
    seen = {(call.name, call.arguments_json) for call in standing}
    ids = {call.id for call in standing}
    out = []
    for call in calls:
        if (call.name, call.arguments_json) in seen:
            continue
        seen.add((call.name, call.arguments_json))
        if call.id in ids:
            # A server that numbers ids per reply: tool results are matched by id.
            call = ToolCall(
                "call_" + secrets.token_hex(12), call.name, call.arguments, call.arguments_json
            )
        ids.add(call.id)
        out.append(call)
    return out


def warning(problems: Sequence[Problem], *, passed: bool = False) -> str | None:
    """The ``toolrelay_warning`` for a round's problems: invalid calls dropped, or
    (``passed``, the ``warn`` setting) passed on as the model wrote them; a
    rejected call is always dropped, it has nothing to pass on."""
    kept = [problem for problem in problems if passed and problem.call is not None]
    dropped = [problem for problem in problems if problem not in kept]
    parts = []
    if dropped:
        parts.append(f"dropped {_calls(dropped)}: " + "; ".join(map(str, dropped)))
    if kept:
        parts.append(f"passed on {_calls(kept)}: " + "; ".join(map(str, kept)))
    return " | ".join(parts) or None


def _calls(problems: Sequence[Problem]) -> str:
    return f"{len(problems)} invalid tool call{'s' if len(problems) != 1 else ''}"


def nothing_usable(problems: Sequence[Problem]) -> str:
    """The answer when the model's calls were all dropped and it wrote no prose."""
    listed = "; ".join(str(problem) for problem in problems)
    return f"{NOTHING_USABLE}{listed}.)"


def model_said_something(content: str | None) -> bool:
    """Whether ``content`` holds words of the model's own (toolrelay's note that
    no call could be used is not an answer)."""
    text = (content or "").strip()
    return bool(text) and not text.startswith(NOTHING_USABLE)


@dataclass(frozen=True)
class Settled:
    """What a re-ask leaves: the calls it adds, and the problems that remain."""

    # The re-ask's valid calls that do not repeat a call that already stood.
    added: tuple[ToolCall, ...]
    # Problems dropped: the re-ask's own, or the first attempt's when it fixed none.
    dropped: tuple[Problem, ...]


def settle(first: CheckedCalls, again: CheckedCalls) -> Settled:
    added = tuple(new_calls(again.accepted, first.accepted))
    if again.problems:
        return Settled(added, again.problems)
    return Settled(added, () if added else first.problems)


# Compiled (setup.py), and tests subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class CallHold:
    """Holds each streamed call until it is complete and valid, then releases it whole.

    Content and reasoning pass at once. A call goes out as its start, one argument
    delta holding its whole arguments (with its coercions applied) and its end,
    renumbered so that the calls that go out are numbered 0, 1, ... in the order
    they are released: held to the end, its fragments would reach the client in
    the same write anyway, and one delta is one event, one stage pass and one
    encoding where each fragment was one (the contract holds: the concatenated
    deltas are the call's ``arguments_json``). An invalid or rejected call becomes
    a problem and does not go out (with ``pass_invalid``, the ``warn`` setting, an
    invalid call goes out as it came, in one delta).
    """

    __slots__ = (
        "_held",
        "accepted",
        "coerced",
        "content",
        "pass_invalid",
        "problems",
        "released",
        "tools",
    )

    # A call valid as it came goes out with the start it came with (and its one
    # delta, when it came in one), when those are the events a release would make
    # (the tests compare with False: every call checked and its events made anew).
    as_sent: ClassVar[bool] = True

    def __init__(self, tools: ToolSet, *, pass_invalid: bool = False) -> None:
        self.tools = tools
        self.pass_invalid = pass_invalid
        # Per call being held: its ToolCallStart (when it came), then its argument deltas.
        self._held: dict[int, list[ToolCallStart | ToolCallArgumentsDelta]] = {}
        # Valid calls released, coercions applied; ``released`` counts every call out.
        self.accepted: list[ToolCall] = []
        self.released = 0
        self.coerced = 0
        self.problems: list[Problem] = []
        self.content: list[str] = []

    def feed(self, event: Event) -> list[Event]:
        if isinstance(event, ToolCallArgumentsDelta):  # the most frequent of a call's events
            self._held.setdefault(event.index, []).append(event)
        elif isinstance(event, ToolCallStart):
            self._held[event.index] = [event]
        elif isinstance(event, ToolCallEnd):
            return self._end(event, self._held.pop(event.index, []))
        elif isinstance(event, CallRejected):
            if event.index is not None:
                self._held.pop(event.index, None)  # started, then cut: never released
            rejected = event.call
            self.problems.append(Problem(rejected.name, rejected.raw, rejected.reason))
        else:
            if isinstance(event, ContentDelta):
                self.content.append(event.text)
            return [event]
        return []

    def release(self, calls: Iterable[ToolCall]) -> list[Event]:
        """Events for valid calls checked elsewhere (a re-ask's)."""
        out: list[Event] = []
        for call in calls:
            self.accepted.append(call)
            out.extend(self._release(call))
        return out

    def _end(
        self, end: ToolCallEnd, held: list[ToolCallStart | ToolCallArgumentsDelta]
    ) -> list[Event]:
        call = end.call
        if self.as_sent and self.tools.valid_as_sent(call.name, call.arguments):
            self.accepted.append(call)  # as check_calls would accept it: nothing coerced
            return self._release_as_held(end, held)
        checked = check_calls([call], (), self.tools)
        if checked.problems:
            self.problems.extend(checked.problems)
            return self._release(call) if self.pass_invalid else []
        final = checked.accepted[0]
        self.accepted.append(final)
        self.coerced += checked.coerced
        return self._release(final)

    def _release_as_held(
        self, end: ToolCallEnd, held: list[ToolCallStart | ToolCallArgumentsDelta]
    ) -> list[Event]:
        """A call that stands as it came: its own start and end when they are already
        numbered as it goes out (the usual case: calls come and go out 0, 1, ...),
        its own delta too when it came in one."""
        call = end.call
        start = held[0] if held else None
        if (
            isinstance(start, ToolCallStart)
            and len(held) > 1
            and end.index == self.released
            and start.id == call.id
            and start.name == call.name
        ):
            self.released += 1
            delta = held[1]
            if (
                len(held) == 2
                and isinstance(delta, ToolCallArgumentsDelta)
                and delta.text == call.arguments_json
            ):
                return [start, delta, end]
            return [start, ToolCallArgumentsDelta(end.index, call.arguments_json), end]
        return self._release(call)

    def _release(self, call: ToolCall) -> list[Event]:
        index = self.released
        self.released += 1
        return [
            ToolCallStart(index, call.id, call.name),
            ToolCallArgumentsDelta(index, call.arguments_json),
            ToolCallEnd(index, call),
        ]
