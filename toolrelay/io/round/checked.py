"""A round's calls checked against their tools' schemas (the ``validate``
setting), corrected by one re-ask, and counted.

:func:`complete_checked` and :func:`checked_stages` sit below the entry points
(:mod:`~toolrelay.io.round.answered`) and above
:mod:`~toolrelay.io.round.complete` and :mod:`~toolrelay.io.round.streamed`.
With validation off (or under ``tool_choice`` ``"none"``) rejected calls are
only noted in a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolrelay.correction import (
    CallHold,
    CheckedCalls,
    Problem,
    check_calls,
    correction_messages,
    nothing_usable,
    settle,
    warning,
    written_call,
)
from toolrelay.events import CallRejected, ContentDelta, RejectedCall, ToolCall, ToolCallStart
from toolrelay.examples import is_copy
from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.quality import rejection_kind
from toolrelay.io.recording import CORRECTION, next_attempt_because
from toolrelay.io.round.batches import Stage
from toolrelay.io.round.body import call_limit, checks_calls, finish_reason
from toolrelay.io.round.complete import complete_handling_required
from toolrelay.io.round.request import Finish, Opened, Reply, RoundRequest, StreamItem

# One line per re-ask after invalid calls, on a logger of its own.
repair_log = logging.getLogger("toolrelay.repair")


async def complete_checked(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """One non-streamed round, with every fallback, ``tool_choice`` enforced and
    the calls checked (``req.validate``)."""
    reply = await complete_handling_required(backend, req, counters)
    if not checks_calls(req):
        return _noted(req, reply)
    return await _checked_reply(backend, req, counters, reply)


def checked_stages(backend: Backend, req: RoundRequest, counters: Counters) -> list[Stage]:
    """The stage of :func:`~toolrelay.io.round.answered.stream_round` that checks the
    calls (``req.validate``), each held until complete and valid; with validation off,
    the one that notes the rejected calls; none without tools."""
    if not req.has_tools:
        return []  # no parser, no native calls: nothing to note
    if not checks_calls(req):
        return [_Noted(req)]
    return [_Checked(backend, req, counters)]


# --- rejected calls, unchecked (validation off) --------------------------------------


def _noted(req: RoundRequest, reply: Reply) -> Reply:
    """Calls the parser rejected still get a ``toolrelay_warning`` naming each one and
    why, and a reply they would leave empty says so instead."""
    if not reply.rejected or req.plan.mode == "none":
        return reply
    problems = check_calls((), reply.rejected, req.toolset).problems
    content = reply.content
    if not reply.calls and not (content or "").strip():
        content = nothing_usable(problems)
    return replace(
        reply, content=content, warning=joined_warnings(reply.warning, warning(problems))
    )


class _Noted:
    """``_noted`` for a stream: the warning rides on the Finish."""

    __slots__ = ("answered", "rejected", "req")

    def __init__(self, req: RoundRequest) -> None:
        self.req = req
        self.rejected: list[RejectedCall] = []
        self.answered = False

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        req = self.req
        out: list[StreamItem] = []
        for item in batch:
            if isinstance(item, CallRejected):
                self.rejected.append(item.call)
            elif isinstance(item, ToolCallStart) or (
                isinstance(item, ContentDelta) and item.text.strip()
            ):
                self.answered = True
            elif isinstance(item, Finish) and self.rejected and req.plan.mode != "none":
                problems = check_calls((), self.rejected, req.toolset).problems
                if not self.answered:
                    out.append(ContentDelta(nothing_usable(problems)))
                item = replace(item, warning=joined_warnings(item.warning, warning(problems)))
            out.append(item)
        return out

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        return self.batch(batch)


# --- checking calls (the validate setting) ---------------------------------------


async def _checked_reply(
    backend: Backend, req: RoundRequest, counters: Counters, reply: Reply
) -> Reply:
    """The reply with its calls checked: coerced, passed on with a warning
    (``warn``), or corrected by one re-ask (``repair``)."""
    first = check_calls(reply.calls, reply.rejected, req.toolset)
    _count_checked(counters, backend, req, first.accepted, first.coerced, first.problems)
    if not first.problems:
        return replace(reply, calls=list(first.accepted), rejected=[])
    if req.validate == "warn":
        _count_warned(counters, backend, req, first.problems)
        joined = joined_warnings(reply.warning, warning(first.problems, passed=True))
        return replace(reply, calls=list(first.passed), rejected=[], warning=joined)
    again, added, dropped = await _reask_for_calls(backend, req, counters, reply.content, first)
    calls = [*first.accepted, *added]
    content = reply.content
    if not calls and not (content or "").strip():
        content = _prose(again, dropped)
    return replace(
        reply,
        content=content if content or not calls else None,
        calls=calls,
        rejected=[],
        finish_reason=finish_reason(req, bool(calls), reply.finish_reason),
        usage=usage_sum(reply.usage, again.usage if again else None),
        warning=joined_warnings(reply.warning, _dropped_warning(again, dropped)),
    )


class _Checked:
    """Each call held until it is complete and valid; the re-ask at the end."""

    __slots__ = ("backend", "counters", "hold", "req")

    def __init__(self, backend: Backend, req: RoundRequest, counters: Counters) -> None:
        self.backend = backend
        self.req = req
        self.counters = counters
        self.hold = CallHold(req.toolset, pass_invalid=req.validate == "warn")

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        out: list[StreamItem] = []
        feed = self.hold.feed
        for item in batch:
            if isinstance(item, Opened):
                out.append(item)
            else:
                out.extend(feed(item))  # type: ignore[arg-type]  # (no Finish here)
        return out

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        finish = batch[-1]
        assert isinstance(finish, Finish)
        out = self.batch(batch[:-1])
        out.extend(await _settle_stream(self.backend, self.req, self.counters, self.hold, finish))
        return out


async def _settle_stream(
    backend: Backend, req: RoundRequest, counters: Counters, hold: CallHold, finish: Finish
) -> list[StreamItem]:
    """What ends a held stream: the re-ask's corrections, the prose when nothing
    is left, and the :class:`Finish` with the warning."""
    _count_checked(counters, backend, req, hold.accepted, hold.coerced, hold.problems)
    if not hold.problems:
        return [finish]
    if req.validate == "warn":
        _count_warned(counters, backend, req, hold.problems)
        return [
            replace(
                finish, warning=joined_warnings(finish.warning, warning(hold.problems, passed=True))
            )
        ]
    content = "".join(hold.content)
    first = CheckedCalls(tuple(hold.accepted), hold.coerced, tuple(hold.problems))
    again, added, dropped = await _reask_for_calls(
        backend, req, counters, content, first, hold.released
    )
    out: list[StreamItem] = [*hold.release(added)]
    if not hold.released and not content.strip():
        out.append(ContentDelta(_prose(again, dropped)))
    usage = usage_sum(finish.usage, again.usage if again else None)
    reason = finish_reason(req, hold.released > 0, finish.reason)
    said = joined_warnings(finish.warning, _dropped_warning(again, dropped))
    out.append(replace(finish, reason=reason, usage=usage, warning=said, stop_sequence=None))
    return out


async def _reask_for_calls(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    content: str | None,
    first: CheckedCalls,
    released: int | None = None,
) -> tuple[Reply | None, list[ToolCall], tuple[Problem, ...]]:
    """Ask once more for the problems of ``first``: the re-ask's reply (None when
    the backend failed it), the calls it adds and the problems dropped."""
    retry = _correction_request(req, content, first.accepted, first.problems)
    next_attempt_because(CORRECTION)
    try:
        again = await complete_handling_required(backend, retry, counters)
    except BackendError as exc:
        # The first answer still stands, less its invalid calls.
        repair_log.warning("re-asking %s failed (%s): invalid calls dropped", req.model, exc)
        counters.add("validation", "dropped", len(first.problems))
        counters.quality.add(backend.name, req.model, "checked", "dropped", len(first.problems))
        return None, [], first.problems
    settled = settle(first, check_calls(again.calls, again.rejected, req.toolset))
    limit = call_limit(req)
    standing = len(first.accepted) if released is None else released
    added = list(settled.added if limit is None else settled.added[: max(limit - standing, 0)])
    _count_repair(counters, backend, req, first.problems, added, settled.dropped)
    return again, added, settled.dropped


def _dropped_warning(again: Reply | None, dropped: Sequence[Problem]) -> str | None:
    """What the client is told of the calls dropped, and of a re-ask whose
    constrained call the token limit cut (why it corrected nothing)."""
    cut = again.warning if again is not None and again.cut else None
    return joined_warnings(warning(dropped), cut)


def _prose(again: Reply | None, dropped: Sequence[Problem]) -> str:
    """The answer when no call is left and the first attempt wrote no prose."""
    if again is not None and again.content and again.content.strip():
        return again.content
    return nothing_usable(dropped)


def _correction_request(
    req: RoundRequest,
    content: str | None,
    accepted: Sequence[ToolCall],
    problems: Sequence[Problem],
) -> RoundRequest:
    attempt = [written_call(call) for call in accepted] + [problem.written for problem in problems]
    messages = correction_messages(req.messages, content, attempt, problems, accepted)
    # The directive is ours: a model that repeats it has not answered with it.
    injected = (*req.injected, messages[-1]["content"])
    return replace(
        req,
        body={**req.body, "messages": messages},
        messages=messages,
        injected=injected,
        correcting=_corrected_tools(req, problems),
    )


def _corrected_tools(req: RoundRequest, problems: Sequence[Problem]) -> tuple[str, ...]:
    """What the re-ask's answer is constrained to: a call of the tool whose call it
    corrects (any allowed tool when that call named none we know). Several calls
    to correct are asked for unconstrained: a constraint holds one call.

    Unless a call is required, a copy of the prompt's example is no call of the
    model's own: its re-ask is left free to answer in words, as the correction
    says (constrained to a call, SmolLM2-135M on llama.cpp answered "What is the
    capital of France?" with get_weather)."""
    if len(problems) != 1:
        return ()
    problem = problems[0]
    if problem.call is not None:
        return (problem.call.name,)
    if req.plan.mode != "required" and is_copy(problem.reason):
        return ()
    return tuple(tool.name for tool in req.plan.tools)


def _count_checked(
    counters: Counters,
    backend: Backend,
    req: RoundRequest,
    accepted: Sequence[ToolCall],
    coerced: int,
    problems: Sequence[Problem],
) -> None:
    """A round's calls as they arrived: valid, coerced, or invalid (and why)."""
    if len(accepted) > coerced:
        counters.add("validation", "valid", len(accepted) - coerced)
    if coerced:
        counters.add("validation", "coerced", coerced)
    add = counters.quality.add
    add(backend.name, req.model, "checked", "valid", len(accepted) - coerced)
    add(backend.name, req.model, "checked", "coerced", coerced)
    add(backend.name, req.model, "checked", "invalid", len(problems))
    for problem in problems:
        kind = rejection_kind(problem.reason, problem.call is not None)
        add(backend.name, req.model, "rejected", kind)


def _count_warned(
    counters: Counters, backend: Backend, req: RoundRequest, problems: Sequence[Problem]
) -> None:
    passed = sum(problem.call is not None for problem in problems)
    if passed:
        counters.add("validation", "invalid", passed)
    if len(problems) > passed:
        counters.add("validation", "dropped", len(problems) - passed)
    counters.quality.add(backend.name, req.model, "checked", "passed", passed)
    counters.quality.add(backend.name, req.model, "checked", "dropped", len(problems) - passed)


def _count_repair(
    counters: Counters,
    backend: Backend,
    req: RoundRequest,
    problems: Sequence[Problem],
    added: Sequence[ToolCall],
    dropped: Sequence[Problem],
) -> None:
    if added:
        counters.add("validation", "repaired", len(added))
    if dropped:
        counters.add("validation", "dropped", len(dropped))
    add = counters.quality.add
    add(backend.name, req.model, "repairs", "asked")
    add(backend.name, req.model, "repairs", "won", 1 if added else 0)
    add(backend.name, req.model, "checked", "repaired", len(added))
    add(backend.name, req.model, "checked", "dropped", len(dropped))
    repair_log.info(
        "re-asked %s to correct %d tool call(s) (%s): %d corrected, %d dropped%s",
        req.model,
        len(problems),
        "; ".join(map(str, problems)),
        len(added),
        len(dropped),
        f" ({'; '.join(map(str, dropped))})" if dropped else "",
    )


def joined_warnings(first: str | None, second: str | None) -> str | None:
    return "; ".join(part for part in (first, second) if part) or None


def usage_sum(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    """Both rounds' token counts: the client is served (and billed) for both."""
    if not first or not second:
        return first or second
    total = dict(first)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if isinstance(first.get(key), int) and isinstance(second.get(key), int):
            total[key] = first[key] + second[key]
    return total
