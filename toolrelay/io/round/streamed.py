"""The streamed path of a round, in layers as httpx's ``send`` is:

``stream_handling_fallbacks`` -> ``_relay_single_stream``, which opens the
stream with ``_open_handling_refusals`` (a coroutine, not a generator around
the relay: a batch passes through one frame fewer), each one function calling
the next. Batches of items come out: ``[Opened()]`` first, the last batch
ending with one :class:`Finish`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncGenerator
from functools import partial
from typing import Any

from toolrelay.echo import EchoCleaner
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.backends.plain import ContentRun
from toolrelay.io.counters import Counters
from toolrelay.io.recording import next_attempt_because
from toolrelay.io.round.body import (
    ChunkReader,
    backend_body,
    call_limit,
    calls_toolset,
    checks_calls,
    count_formats,
    finish_reason,
    injected_texts,
    over_limit_warning,
    parse_format,
    parse_tools,
    stop_sequence,
)
from toolrelay.io.round.complete import (
    complete_handling_required,
    rescued,
    round_mode,
    watch_silence,
)
from toolrelay.io.round.constraints import (
    Constraint,
    cut_mid_call,
    cut_warning,
    learn_refused,
    refused,
    round_constraint,
    without,
)
from toolrelay.io.round.observed import ObservedAttempt, observe
from toolrelay.io.round.request import (
    Finish,
    Opened,
    Reply,
    RoundRequest,
    StreamItem,
    reply_events,
)
from toolrelay.types import ToolSpec
from toolrelay.undecided import stream_parser

log = logging.getLogger("toolrelay.rounds")


def stream_handling_fallbacks(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
    runs: bool = False,
) -> AsyncGenerator[list[StreamItem], None]:
    """A streamed round (its calls not checked yet). A required call may need a
    re-ask, and a backend known (or configured) to lose streamed calls is asked
    without streaming: the finished reply is streamed instead. ``runs``: the
    caller takes a read's plain content as one :class:`ContentRun` where
    nothing reads the content on the way (no parser, no echo cleaner)."""
    if req.has_tools and (
        req.plan.mode == "required" or not req.stream_tools or backend.holds_streams(req.model)
    ):
        return _stream_finished_reply(backend, req, counters, patience)
    return _relay_single_stream(backend, req, counters, patience, runs)


async def _stream_finished_reply(
    backend: Backend, req: RoundRequest, counters: Counters, patience: float | None
) -> AsyncGenerator[list[StreamItem], None]:
    task = asyncio.ensure_future(complete_handling_required(backend, req, counters))
    try:
        done, _ = await asyncio.wait({task}, timeout=patience)
        if not done:
            yield [Opened()]
        reply = await task
    finally:
        task.cancel()
    if done:
        yield [Opened(reply.mode)]
    yield [*reply_events(reply), _finish_of(reply, reply.usage)]


# The opened stream (its first batch read and given back: ChunkStream.unread),
# what observes the attempt, and the constraint the request carried.
_Opened = tuple[ChunkStream, "ObservedAttempt | None", Constraint | None]


async def _open_handling_refusals(
    backend: Backend, req: RoundRequest, counters: Counters, patience: float | None
) -> tuple[RoundMode, _Opened]:
    """The stream opened in the round's mode; a backend that refuses its tools
    gets it on the rescue path."""
    mode = await round_mode(backend, req)
    try:
        return mode, await _open(backend, req, mode, counters, patience)
    except BackendError as exc:
        # Made only here: a closure made for every stream costs each one.
        async def attempt(mode: RoundMode) -> tuple[RoundMode, _Opened]:
            return mode, await _open(backend, req, mode, counters, patience)

        return await rescued(backend, req, mode, counters, exc, attempt)


async def _open(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    patience: float | None,
) -> _Opened:
    """The backend's stream (constrained where the round and the backend allow,
    opened again unconstrained when the backend refuses the constraint) and its
    first read, awaited up to ``patience`` seconds: an error event first thing
    in a 200 stream (LM Studio's template errors) is a refusal to start, like
    an error status."""
    constraint = await round_constraint(backend, req, mode, whole=False)
    body = await backend_body(backend, req, mode, constraint=constraint)
    try:
        opened = await _opened(backend, req, mode, body, patience)
    except BackendError as exc:
        if constraint is None or not refused(exc):
            raise
        learn_refused(backend, req, constraint, exc)
        counters.inc("constraints", "refused")
        return *await _opened(backend, req, mode, without(body, constraint), patience), None
    if constraint is not None:
        counters.inc("constraints", constraint.kind)
    return *opened, constraint


async def _opened(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    body: dict[str, Any],
    patience: float | None,
) -> tuple[ChunkStream, ObservedAttempt | None]:
    observed = observe(backend, req, mode, body, stream=True)
    try:
        # A recorded or traced attempt keeps every chunk as the backend sent it.
        chunks = await backend.open_stream(body, auth=req.auth, plain=observed is None)
        try:
            await _first_read(chunks, patience)
        except BaseException:
            # The backend stops generating (the client left before the stream opened, say).
            await chunks.aclose()
            raise
    except BackendError as exc:
        if observed is not None:
            observed.failed(exc.message)
        raise
    return chunks, observed


async def _first_read(chunks: ChunkStream, patience: float | None) -> None:
    """The stream's first batch, awaited up to ``patience`` seconds and given back
    to the stream for the relay, with no task of its own (nor
    ``asyncio.timeout``'s, dearer than this timer): a read cut off by the
    deadline loses nothing (a ``ChunkStream`` waits only on the socket, before
    it takes any bytes), so the relay reads it again after opening."""
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = None if patience is None else asyncio.get_running_loop().call_later(patience, expire)
    try:
        chunks.unread(await chunks.__anext__())
    except StopAsyncIteration:
        pass  # ended before its first chunk: the relay's first read ends it too
    except asyncio.CancelledError:
        # Ours, unless someone else (the client's departure) cancelled too. Before
        # 3.11 a task cannot tell: a departure in the same instant is missed there.
        if not expired or (sys.version_info >= (3, 11) and task.uncancel() > 0):
            raise
    finally:
        if timer is not None:
            timer.cancel()


async def _relay_single_stream(
    backend: Backend, req: RoundRequest, counters: Counters, patience: float | None, runs: bool
) -> AsyncGenerator[list[StreamItem], None]:
    """The stream, opened (:func:`_open_handling_refusals`) and read into items.
    Opening it here, not in a generator of its own around this one, saves each
    batch a frame to pass through."""
    mode, (chunks, observed, constraint) = await _open_handling_refusals(
        backend, req, counters, patience
    )
    has_tools = req.has_tools  # a property: read once
    # Inside: a caller that stops right after Opened closes the backend's stream.
    async with chunks:
        yield [Opened(mode)]
        if has_tools:
            counters.inc("rounds", mode)
        tools = parse_tools(req)
        opened = has_tools and await backend.reasoning_open(req.model, req.body, req.reasoning_open)
        # Copies of the examples exist only where the prompt showed them.
        texts = injected_texts(req, mode)
        # None when there is nothing to clean (a native round whose prompt is the client's).
        cleaner = (
            EchoCleaner(texts, tools if mode == "rescue" else None)
            if texts or mode == "rescue"
            else None
        )
        state = ChunkReader(
            partial(stream_parser, tools, parse_format(req, mode), reasoning_open=opened)
            if has_tools
            else None,
            # A recorded or traced attempt keeps each fragment's event as it was read.
            partial(_native_stream, req, tools, observed is None)
            if has_tools and mode == "native"
            else None,
            call_limit(req),
            runs=runs and cleaner is None,
        )
        echoes = 0  # copies of the examples the cleaner removed
        ended: list[ToolCall] = []  # the calls that went out, for their formats
        # Without tools the items of the read that brought the backend's [DONE] go
        # out with the stream's end, in one batch: one write to the client less,
        # and no read that only ends the iteration. With tools each batch keeps
        # its own: the answered layer lets toolrelay's notes out at a batch's end,
        # but those of the last batch may give way to a re-ask's answer.
        ends_with_last_read = not has_tools
        last_read: list[StreamItem] = []
        try:
            take = state.take  # looked up once: it runs for every chunk
            async for batch in chunks:
                out: list[StreamItem] = []
                for chunk in batch:
                    take(chunk, out)
                if observed is not None:
                    for chunk in batch:
                        assert isinstance(chunk, dict)  # opened without plain
                        observed.chunk(chunk)
                if out and cleaner:
                    out = _cleaned(cleaner, out)
                if out:
                    if state.formats:  # a call parsed from text started
                        ended += _ended(out)
                    if observed is not None:
                        observed.parsed(_events(out), formats=state.formats)
                    if ends_with_last_read and chunks.ended:
                        last_read = out
                        break
                    yield out
        except BackendError as exc:
            # The stream started and then broke: counted by how it ended.
            counters.inc("broken_streams", exc.reason or "error")
            if observed is not None:
                observed.failed(exc.message)
            raise
    last: list[StreamItem] = []
    state.close(last)
    raw = "".join(state.raw)
    cut = constraint is not None and state.finish == "length" and cut_mid_call(constraint, raw)
    if cut:
        # The call the token limit cut is no call, and none to correct: its end (or
        # rejection) is left out, and the start the cleaner holds never goes out.
        state.cut += sum(isinstance(item, ToolCallEnd) for item in last)
        last = [item for item in last if not isinstance(item, _CALL_EVENTS)]
    if cleaner:
        last = [*_cleaned(cleaner, last), *cleaner.close()]
        echoes = cleaner.removed_calls
    if state.formats:
        ended += _ended(last)
    if observed is not None:
        observed.parsed(_events(last), formats=state.formats)
        observed.streamed(raw, state.usage, state.finish)
    if has_tools and mode == "native" and state.text_calls:  # none without tools
        backend.learn(req.model, "emits_text_calls")
        counters.inc("text_calls")
    if has_tools:
        _count_quality(counters, backend, req, mode, state, echoes)
        count_formats(counters, backend, req, ended, state.formats)
    _learn_reasoning(backend, req, state, opened)
    swallowed = not (state.saw_text or state.calls or state.rejected) and state.finish != "length"
    if has_tools and swallowed and req.plan.mode != "none":
        # The stream came back empty although tools were sent: the backend's
        # streamed tool parsing lost the call. Ask once without streaming. (A
        # round the token limit cut short, in its reasoning, lost nothing.)
        counters.inc("fallbacks", "swallowed_stream")
        counters.quality.add(backend.name, req.model, "reasks", "swallowed_stream")
        log.info("model %s: a streamed round came back empty; asking without streaming", req.model)
        next_attempt_because("a streamed round came back empty: asked without streaming")
        reply = await complete_handling_required(backend, req, counters)
        if reply.calls:
            # Direct evidence only: the same request, streamed without its call.
            reason = (
                f"a streamed request came back empty; the same request without streaming "
                f"brought {len(reply.calls)} call(s) ({', '.join(c.name for c in reply.calls)})"
            )
            backend.learn(req.model, "swallows_streamed_calls", reason=reason)
        last.extend(reply_events(reply))
        last.append(_finish_of(reply, reply.usage or state.usage))
        yield last
        return
    called = state.calls - state.cut > echoes
    if has_tools:
        watch_silence(backend, req, mode, called)
        if called:
            backend.streamed_call(req.model)
    said = stop_sequence(req, state.finish_choice) if state.finish_choice else None
    stopped = None if called else said
    reason = finish_reason(req, called, state.finish)
    notes = (over_limit_warning(state.dropped), cut_warning(req) if cut else None)
    warning = "; ".join(filter(None, notes)) or None  # no generator's frame
    last[:0] = last_read
    last.append(Finish(reason, state.usage, warning, stopped, raw, mode))
    yield last


def _native_stream(
    req: RoundRequest, tools: tuple[ToolSpec, ...], unobserved: bool
) -> NativeStream:
    # The checked stage holds each call until it is whole: no event per fragment.
    return NativeStream(calls_toolset(req, tools), held=unobserved and checks_calls(req))


_CALL_EVENTS = (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd, CallRejected)


def _count_quality(
    counters: Counters,
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    state: ChunkReader,
    echoes: int,
) -> None:
    """A streamed round's calls by source, and the markup taken out of its content."""
    add = counters.quality.add
    text = state.text_calls - echoes
    if mode == "native":
        add(backend.name, req.model, "calls", "native", state.calls - state.text_calls)
        add(backend.name, req.model, "calls", "text", text)
        if state.text_calls or state.rejected:
            add(backend.name, req.model, "markup_removed", "tool_calls")
    else:
        add(backend.name, req.model, "calls", "rescue", text)
    if echoes:
        add(backend.name, req.model, "markup_removed", "echoes")


def _finish_of(reply: Reply, usage: dict[str, Any] | None) -> Finish:
    """The end of a stream that relays a finished reply."""
    return Finish(
        reply.finish_reason, usage, reply.warning, reply.stop_sequence, reply.raw, reply.mode
    )


def _ended(items: list[StreamItem]) -> list[ToolCall]:
    return [item.call for item in items if isinstance(item, ToolCallEnd)]


def _events(items: list[StreamItem]) -> list[Event]:
    """The items' events, a run's texts each as the ContentDelta it stands for."""
    events: list[Event] = []
    for item in items:
        if isinstance(item, ContentRun):
            events += map(ContentDelta, item.texts)
        elif not isinstance(item, Opened | Finish):
            events.append(item)
    return events


def _cleaned(cleaner: EchoCleaner, items: list[StreamItem]) -> list[StreamItem]:
    return [*cleaner.feed(_events(items))]


def _learn_reasoning(
    backend: Backend, req: RoundRequest, state: ChunkReader, opened: bool | None
) -> None:
    """An orphan closing tag teaches that the template opens the model's reasoning; an
    answer that was reasoning from end to end under that lesson unlearns it."""
    if not state.parses or req.reasoning_open is not None:
        return  # nothing parsed, or the model's setting says
    answered = state.saw_text or state.calls or state.rejected
    if not opened and state.orphan_close:
        backend.learn(req.model, "opens_reasoning")
    elif opened is None and answered:
        # Not known before, and an answer came without an orphan closing tag:
        # the model's next streams need not be held back (UndecidedStreamParser).
        backend.learn(req.model, "opens_reasoning", False)
    elif (
        opened
        and not answered
        and state.finish == "stop"
        and backend.knows(req.model, "opens_reasoning")
    ):
        backend.learn(req.model, "opens_reasoning", False)
