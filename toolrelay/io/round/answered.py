"""The round's entry points, and its outermost layer: a round that leaves the
client nothing is not an answer (issue 24).

A weak model on the rescue path may copy the prompt toolrelay wrote (the tool
listing, the directive, the correction), and after a tool result may repeat
the history instead of answering: once its copies and markup are removed
nothing is left, although the same model, asked the question plainly, answers
it. Such a round is asked once more: on the rescue path without the tool
listing (the question as the model would get it from the server directly),
natively with the history in plain words (earlier calls and results as short
sentences, no directive to repeat). When that brings nothing either, the
client gets what the backend wrote with the markup removed rather than
``""``, with its ``finish_reason`` (``length`` stays ``length``). A
``required`` or named choice keeps its own strict re-ask instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from mypy_extensions import mypyc_attr

from toolrelay.correction import model_said_something
from toolrelay.echo import markup_removed, remove_echoes
from toolrelay.events import ContentDelta, ToolCallStart
from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.recording import CURRENT_RECORD, next_attempt_because
from toolrelay.io.round.batches import Batches, Stage
from toolrelay.io.round.body import injected_texts
from toolrelay.io.round.checked import checked_stages, complete_checked, joined_warnings, usage_sum
from toolrelay.io.round.complete import complete_without_tools
from toolrelay.io.round.request import (
    TOOL_FIELDS,
    Finish,
    Reply,
    RoundRequest,
    StreamItem,
    reply_events,
)
from toolrelay.io.round.staged import staged
from toolrelay.io.round.streamed import stream_handling_fallbacks
from toolrelay.parse import parse_tool_calls
from toolrelay.rescue import rewrite_history

log = logging.getLogger("toolrelay.rounds")

# A finished, checked round for a request: how the re-ask is made.
_Ask = Callable[[RoundRequest], Awaitable[Reply]]

ASKED_PLAINLY = (
    "the rescue round gave no usable answer (no call, no words of the model's own): "
    "asked again without the tool listing"
)
ASKED_IN_WORDS = "the answer was only echoes and markup: asked again with the history in words"
KEPT_WORDS = "nothing but echoes and markup came back: the backend's text with the markup removed"


async def complete_round(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """One non-streamed round, with every fallback, ``tool_choice`` enforced, the
    calls checked (``req.validate``), and never an answer that leaves nothing."""
    if req.has_tools:

        async def ask(again: RoundRequest) -> Reply:
            return await complete_checked(backend, again, counters)

        first = await complete_checked(backend, req, counters)
        reply = await _answered(backend.name, req, first, ask, counters)
    else:
        # Never empty-handed, nothing to check: the layers above the attempt are skipped.
        reply = await complete_without_tools(backend, req, counters)
    record = CURRENT_RECORD.get()
    if record is not None:
        record.answer_out(len(reply.calls), reply.warning)
    return reply


def stream_round(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None = 10.0,
    runs: bool = False,
) -> Batches:
    """One streamed round, in batches: ``[Opened()]``, then lists of events,
    the last list ending with one :class:`Finish`.

    A batch holds what one read from the backend produced, for a relay to
    write at once. Errors before :class:`Opened` are the backend's refusal to
    start; after it they are failures mid-stream. A round answered without
    streaming opens after ``patience`` seconds at the latest (None: once
    answered), so that the caller can keep the client's connection alive.
    Content streams as it comes; each call is held until it is complete and
    checked (``req.validate``), then goes out at once; a round that gave
    nothing ends with the re-ask's answer. ``runs``: the caller takes a
    read's plain content as one :class:`ContentRun` where no layer reads it.
    """
    items, stages = stream_round_stages(backend, req, counters, patience=patience, runs=runs)
    return staged(items, stages) if stages else items


def stream_round_stages(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
    runs: bool,
) -> tuple[Batches, list[Stage]]:
    """:func:`stream_round`'s batches before its stages, and the stages, in the
    order each batch passes them (:func:`~toolrelay.io.round.batches.passed`): for
    a caller that reads the batches in a loop of its own and runs the stages
    there, one generator fewer on each batch's path."""
    stages = checked_stages(backend, req, counters)
    # Nothing to re-ask without tools (a round without tools is never empty-handed).
    if req.has_tools or CURRENT_RECORD.get() is not None:
        stages.append(_Answered(backend, req, counters))
    # The stages read events: no run reaches them.
    items = stream_handling_fallbacks(
        backend, req, counters, patience=patience, runs=runs and not stages
    )
    return items, stages


def _empty_handed(req: RoundRequest, calls: bool, content: str | None) -> bool:
    """A round with tools that gives the client no call and no words of the model's
    own; a required or named choice has its own re-ask (a call is what it wants)."""
    return (
        req.has_tools
        and req.plan.mode in ("auto", "none")
        and not calls
        and not model_said_something(content)
    )


def _plain_request(req: RoundRequest, *, listing: bool) -> RoundRequest:
    """The request again with its history in plain words; without any tool unless
    ``listing`` (the question as the model would get it direct)."""
    messages = rewrite_history(req.messages, plain=True)
    if listing:
        return replace(req, body={**req.body, "messages": messages}, messages=messages)
    body = {key: value for key, value in req.body.items() if key not in TOOL_FIELDS}
    body["messages"] = messages
    return replace(req, body=body, messages=messages, tools=None, tool_choice=None)


def _own_texts(req: RoundRequest) -> tuple[str, ...]:
    """Everything toolrelay may have written into this request's prompts."""
    return injected_texts(req, "rescue")


async def _answered(
    backend: str, req: RoundRequest, reply: Reply, ask: _Ask, counters: Counters
) -> Reply:
    """``reply``, or when it leaves the client nothing, the re-ask's answer, else
    the backend's text with the markup removed."""
    if not _empty_handed(req, bool(reply.calls), reply.content):
        return reply
    better = await _asked_again(backend, req, reply.mode == "rescue", reply.raw, ask, counters)
    if better is not None:
        note, again = better
        return replace(
            again,
            warning=joined_warnings(joined_warnings(reply.warning, again.warning), note),
            usage=usage_sum(reply.usage, again.usage),
            raw=reply.raw,
            rejected=reply.rejected,  # what the first answer held, as it was
        )
    kept = markup_removed(reply.raw or "", _own_texts(req))
    if kept:
        return replace(reply, content=kept, warning=joined_warnings(reply.warning, KEPT_WORDS))
    return reply


async def _asked_again(
    backend: str, req: RoundRequest, rescued: bool, raw: str | None, ask: _Ask, counters: Counters
) -> tuple[str, Reply] | None:
    """The re-ask's note and answer, when it brought one."""
    if not rescued and not (raw or "").strip():
        return None  # the backend wrote nothing: cleaning emptied nothing
    note = ASKED_PLAINLY if rescued else ASKED_IN_WORDS
    why = "asked_plainly" if rescued else "asked_in_words"
    counters.inc("fallbacks", why)
    counters.quality.add(backend, req.model, "reasks", why)
    next_attempt_because(note)
    log.info("model %s: %s", req.model, note)
    try:
        again = await ask(_plain_request(req, listing=not rescued))
    except BackendError as exc:
        log.warning("model %s: the re-ask failed (%s)", req.model, exc)
        return None
    if rescued:
        # No tool was offered: a call in this answer is text, its markup removed.
        text = parse_tool_calls(again.content or "", req.plan.declared).content
        again = replace(again, content=remove_echoes(text, _own_texts(req)).strip(), calls=[])
    if again.calls or model_said_something(again.content):
        return note, again
    return None


# Compiled (setup.py), and tests subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class _Answered:
    """:func:`_answered` for a stream: what goes out is watched, and a round that
    gave nothing ends with the re-ask's answer (or the backend's words) instead
    of toolrelay's note."""

    __slots__ = ("backend", "calls", "counters", "record", "req", "spoke")

    def __init__(self, backend: Backend, req: RoundRequest, counters: Counters) -> None:
        self.backend = backend
        self.req = req
        self.counters = counters
        self.spoke = False
        self.record = CURRENT_RECORD.get()
        self.calls = 0

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        out, held = self._watched(batch)
        if held:  # rare: the notes go last
            out += held
        # Only a recorded round has anything to note: no call for the others.
        return out if self.record is None else self._recorded(out)

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        finish = batch[-1]
        assert isinstance(finish, Finish)
        out, held = self._watched(batch[:-1])
        if self.spoke or not _empty_handed(self.req, False, None):
            # Most rounds: nothing to ask again, no coroutine of _stream_end's.
            out += held
            out.append(finish)
        else:
            backend, ask = self.backend.name, self._ask
            out += await _stream_end(backend, self.req, finish, held, ask, self.counters)
        return self._recorded(out)

    async def _ask(self, again: RoundRequest) -> Reply:
        """The re-ask: a finished round on the same backend, its calls checked (a
        method, not a closure made for every stream)."""
        return await complete_checked(self.backend, again, self.counters)

    def _watched(self, batch: list[StreamItem]) -> tuple[list[StreamItem], list[StreamItem]]:
        """What goes out now, and toolrelay's notes, held until the batch's end (only
        when nothing better comes)."""
        out: list[StreamItem] = []
        held: list[StreamItem] = []
        for item in batch:
            if isinstance(item, ToolCallStart):
                self.spoke = True
                out.append(item)
            elif isinstance(item, ContentDelta) and item.text.strip():
                if model_said_something(item.text):
                    self.spoke = True
                    out.append(item)
                else:
                    held.append(item)
            else:
                out.append(item)
        return out, held

    def _recorded(self, out: list[StreamItem]) -> list[StreamItem]:
        record = self.record
        if record is not None:
            self.calls += sum(isinstance(item, ToolCallStart) for item in out)
            for item in out:
                if isinstance(item, Finish):
                    record.answer_out(self.calls, item.warning)
        return out


async def _stream_end(
    backend: str,
    req: RoundRequest,
    finish: Finish,
    held: list[StreamItem],
    ask: _Ask,
    counters: Counters,
) -> list[StreamItem]:
    """The end of a stream that gave the client nothing (:func:`_empty_handed`):
    the re-ask's answer, the backend's words, or ``held`` and ``finish`` as they are."""
    gave = Reply(None, None, [], finish.reason, finish.usage, finish.mode or "native")
    gave = replace(gave, warning=finish.warning, raw=finish.raw)
    reply = await _answered(backend, req, gave, ask, counters)
    if reply is gave:
        return [*held, finish]
    events = reply_events(replace(reply, reasoning=None, rejected=[]))
    return [
        *events,
        replace(finish, reason=reply.finish_reason, usage=reply.usage, warning=reply.warning),
    ]
