"""What the streamed round's relays do with each batch and each stream, as
plain (compiled) code.

The relays that carry a streamed round's batches (:mod:`.relays`) are compiled
async iterators, and the rarer generators (:mod:`.streamed`'s finished reply,
:mod:`.staged`) cannot be compiled: mypyc does not compile async generators, so
they only await and yield. The work on each batch and stream is here:

- :func:`passed`, :func:`passed_last`: a batch through the round's stages (the
  layers above it: the calls checked, the round answered);
- :class:`RoutedBatches`: the routed layer's duties on each batch (the stages,
  the lease's end, the quality record);
- :class:`StreamRead`: a backend's stream read into items, and its end.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from functools import partial
from typing import Any, Protocol

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
from toolrelay.io.backends.http import Chunk
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.backends.plain import ContentRun
from toolrelay.io.counters import Counters
from toolrelay.io.recording import next_attempt_because
from toolrelay.io.round.body import (
    ChunkReader,
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
from toolrelay.io.round.complete import watch_silence
from toolrelay.io.round.constraints import Constraint, cut_mid_call, cut_warning
from toolrelay.io.round.observed import ObservedAttempt
from toolrelay.io.round.request import Finish, Opened, Reply, RoundRequest, StreamItem, reply_events
from toolrelay.types import ToolSpec
from toolrelay.undecided import stream_parser

log = logging.getLogger("toolrelay.rounds")


# --- the stages -------------------------------------------------------------------


class Batches(Protocol):
    """A streamed round's batches as its consumers read them: an async generator,
    or one of the compiled relays (:mod:`.relays`), closed by its consumer."""

    def __aiter__(self) -> AsyncIterator[list[StreamItem]]: ...

    def __anext__(self) -> Awaitable[list[StreamItem]]: ...

    def aclose(self) -> Awaitable[None]: ...


class Stage(Protocol):
    """One layer above a streamed round, batch by batch."""

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        """A batch without the :class:`Finish`."""
        ...

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        """The last batch, ending with the :class:`Finish` (it may re-ask)."""
        ...


def passed(stages: Sequence[Stage], batch: list[StreamItem]) -> list[StreamItem]:
    """A batch without the :class:`Finish` through each stage in turn; one a stage
    leaves empty goes no further (empty is returned). A plain function: only the
    last batch (:func:`passed_last`) may wait, and a coroutine per batch would
    cost each one."""
    for stage in stages:
        batch = stage.batch(batch)
        if not batch:
            break
    return batch


async def passed_last(stages: Sequence[Stage], batch: list[StreamItem]) -> list[StreamItem]:
    """The last batch, ending with the :class:`Finish`, through each stage in turn
    (any may re-ask); one a stage leaves empty goes no further."""
    for stage in stages:
        batch = await stage.last(batch)
        if not batch:
            break
    return batch


def ends(batch: list[StreamItem]) -> bool:
    """Whether ``batch`` is a round's last: it ends with the :class:`Finish`."""
    return bool(batch) and isinstance(batch[-1], Finish)


# --- the routed layer ---------------------------------------------------------------


class Lease(Protocol):
    """A backend's lease for one round (:class:`~toolrelay.io.backends.pool.Lease`)."""

    def end(self, error: BaseException | None = None) -> None: ...


class Judge(Protocol):
    """Where a round's quality is recorded (the :class:`~toolrelay.io.backends.pool.Pool`)."""

    def record_quality(self, backend: Backend, bad: bool) -> None: ...


class Tally(Protocol):
    """The counters of a round whose quality is judged: whether a call came out bad."""

    bad: bool


class RoutedBatches:
    """The routed layer's duties on a round's batches after its :class:`Opened`:
    each through the round's stages, and, once the batch with the
    :class:`Finish` is through, the backend's lease ended and the round's quality
    recorded (before the client reads it). Its relay
    (:class:`~toolrelay.io.round.relays.RoutedStream`) reads, awaits :meth:`last`
    when :meth:`batch` says so, and gives the batch on."""

    def __init__(
        self,
        stages: list[Stage],
        lease: Lease,
        judge: Judge,
        backend: Backend,
        tally: Tally | None,
    ) -> None:
        self._stages = stages
        self._lease = lease
        self._judge = judge
        self._backend = backend
        self._tally = tally
        self._rejected = False  # a call was rejected (only the quality record reads it)

    def batch(self, batch: list[StreamItem]) -> list[StreamItem] | None:
        """``batch`` through the stages, empty when they leave it so (it goes no
        further); None when it is the last and stages may re-ask on it: then
        :meth:`last`, awaited, is its way through."""
        if self._stages:
            if ends(batch):
                return None
            batch = passed(self._stages, batch)
            if not batch:
                return batch
        return self._through(batch)

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        """The last batch through the stages (any may re-ask)."""
        batch = await passed_last(self._stages, batch)
        return self._through(batch) if batch else batch

    def _through(self, batch: list[StreamItem]) -> list[StreamItem]:
        tally = self._tally
        if tally is not None and not self._rejected:
            self._rejected = any(isinstance(item, CallRejected) for item in batch)
        if batch and isinstance(batch[-1], Finish):  # it ends the last batch
            # The backend is done with it: counted before the client reads it.
            self._lease.end()
            if tally is not None:
                self._judge.record_quality(self._backend, tally.bad or self._rejected)
        return batch


# --- a backend's stream, read ---------------------------------------------------


class Ending(Protocol):
    """A backend's stream, as :class:`StreamRead` asks it whether its last read
    came (:attr:`~toolrelay.io.backends.http.ChunkStream.ended`). A protocol, not
    the compiled class: compiled code would call the class's own getter, and the
    tests switch it (``test_stream_end.py``: the general path)."""

    @property
    def ended(self) -> bool: ...


class StreamRead:
    """A streamed round's reading from its first read to its :class:`Finish`: each
    read's chunks into items (:meth:`read`), its breaking (:meth:`broke`), and
    what its end teaches, counts and sends (:meth:`end`). Its relay
    (:class:`~toolrelay.io.round.relays.StreamRelay`) opens the stream, awaits
    the reads and gives on what this gives."""

    def __init__(
        self,
        backend: Backend,
        req: RoundRequest,
        counters: Counters,
        mode: RoundMode,
        stream: Ending,
        observed: ObservedAttempt | None,
        constraint: Constraint | None,
        opened: bool | None,
        runs: bool,
    ) -> None:
        self._backend = backend
        self._req = req
        self._counters = counters
        self._mode = mode
        self._stream = stream
        self._observed = observed
        self._constraint = constraint
        self._opened = opened  # whether the model's output starts inside reasoning
        has_tools = req.has_tools  # a property: read once
        self._has_tools = has_tools
        tools = parse_tools(req)
        # Copies of the examples exist only where the prompt showed them.
        texts = injected_texts(req, mode)
        # None when there is nothing to clean (a native round whose prompt is the client's).
        self._cleaner = (
            EchoCleaner(texts, tools if mode == "rescue" else None)
            if texts or mode == "rescue"
            else None
        )
        self._state = ChunkReader(
            partial(stream_parser, tools, parse_format(req, mode), reasoning_open=opened)
            if has_tools
            else None,
            # A recorded or traced attempt keeps each fragment's event as it was read.
            partial(_native_stream, req, tools, observed is None)
            if has_tools and mode == "native"
            else None,
            call_limit(req),
            runs=runs and self._cleaner is None,
        )
        self._ended: list[ToolCall] = []  # the calls that went out, for their formats
        # Without tools the items of the read that brought the backend's [DONE] go
        # out with the stream's end, in one batch: one write to the client less,
        # and no read that only ends the iteration. With tools each batch keeps
        # its own: the answered layer lets toolrelay's notes out at a batch's end,
        # but those of the last batch may give way to a re-ask's answer.
        self._ends_with_last_read = not has_tools
        self._last_read: list[StreamItem] = []
        self._left: list[StreamItem] = []  # what a re-ask's reply follows (:meth:`reasked`)

    def read(self, batch: list[Chunk]) -> list[StreamItem] | None:
        """One read's items (empty when it brought none to send); None when they
        wait for the stream's end (:meth:`end`), the read being its last."""
        state = self._state
        observed = self._observed
        out: list[StreamItem] = []
        for chunk in batch:
            # Called on the object, not bound once: compiled, a bound method is
            # called through its Python wrapper, a native object's method directly.
            state.take(chunk, out)
        if observed is not None:
            for chunk in batch:
                assert isinstance(chunk, dict)  # opened without plain
                observed.chunk(chunk)
        if out and self._cleaner is not None:
            out = _cleaned(self._cleaner, out)
        if out:
            if state.formats:  # a call parsed from text started
                self._ended += _ended(out)
            if observed is not None:
                observed.parsed(_events(out), formats=state.formats)
            if self._ends_with_last_read and self._stream.ended:
                self._last_read = out
                return None
        return out

    def broke(self, exc: BackendError) -> None:
        """The stream started and then broke: counted by how it ended."""
        self._counters.inc("broken_streams", exc.reason or "error")
        if self._observed is not None:
            self._observed.failed(exc.message)

    def end(self) -> list[StreamItem] | None:
        """The stream's last batch, ending with its :class:`Finish`; None when it
        came back empty although tools were sent (the backend's streamed tool
        parsing lost the call): then it is asked once without streaming, and
        :meth:`reasked` makes the last batch of that reply."""
        backend, req, counters, state = self._backend, self._req, self._counters, self._state
        has_tools, mode, observed = self._has_tools, self._mode, self._observed
        constraint, cleaner = self._constraint, self._cleaner
        last: list[StreamItem] = []
        state.close(last)
        raw = "".join(state.raw)
        cut = constraint is not None and state.finish == "length" and cut_mid_call(constraint, raw)
        if cut:
            # The call the token limit cut is no call, and none to correct: its end (or
            # rejection) is left out, and the start the cleaner holds never goes out.
            state.cut += sum(isinstance(item, ToolCallEnd) for item in last)
            last = [item for item in last if not isinstance(item, _CALL_EVENTS)]
        echoes = 0  # copies of the examples the cleaner removed
        if cleaner is not None:
            last = [*_cleaned(cleaner, last), *cleaner.close()]
            echoes = cleaner.removed_calls
        if state.formats:
            self._ended += _ended(last)
        if observed is not None:
            observed.parsed(_events(last), formats=state.formats)
            observed.streamed(raw, state.usage, state.finish)
        if has_tools and mode == "native" and state.text_calls:  # none without tools
            backend.learn(req.model, "emits_text_calls")
            counters.inc("text_calls")
        if has_tools:
            _count_quality(counters, backend, req, mode, state, echoes)
            count_formats(counters, backend, req, self._ended, state.formats)
        _learn_reasoning(backend, req, state, self._opened)
        swallowed = (
            not (state.saw_text or state.calls or state.rejected) and state.finish != "length"
        )
        if has_tools and swallowed and req.plan.mode != "none":
            # The stream came back empty although tools were sent. Ask once without
            # streaming. (A round the token limit cut short, in its reasoning, lost
            # nothing.)
            counters.inc("fallbacks", "swallowed_stream")
            counters.quality.add(backend.name, req.model, "reasks", "swallowed_stream")
            log.info(
                "model %s: a streamed round came back empty; asking without streaming", req.model
            )
            next_attempt_because("a streamed round came back empty: asked without streaming")
            self._left = last
            return None
        called = state.calls - state.cut > echoes
        if has_tools:
            watch_silence(backend, req, mode, called)
            if called:
                backend.streamed_call(req.model)
        said = stop_sequence(req, state.finish_choice) if state.finish_choice else None
        stopped = None if called else said
        reason = finish_reason(req, called, state.finish)
        notes = (over_limit_warning(state.dropped), cut_warning(req) if cut else None)
        warning = "; ".join([note for note in notes if note]) or None
        last[:0] = self._last_read
        last.append(Finish(reason, state.usage, warning, stopped, raw, mode))
        return last

    def reasked(self, reply: Reply) -> list[StreamItem]:
        """The last batch after :meth:`end` asked again without streaming: what the
        stream's end left, and ``reply``."""
        if reply.calls:
            # Direct evidence only: the same request, streamed without its call.
            reason = (
                f"a streamed request came back empty; the same request without streaming "
                f"brought {len(reply.calls)} call(s) ({', '.join(c.name for c in reply.calls)})"
            )
            self._backend.learn(self._req.model, "swallows_streamed_calls", reason=reason)
        last = self._left
        last.extend(reply_events(reply))
        last.append(finish_of(reply, reply.usage or self._state.usage))
        return last


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
    # Quality.add called on its object, not bound once: compiled, a bound method is
    # called through its Python wrapper, a native object's method directly.
    quality = counters.quality
    name, model = backend.name, req.model
    text = state.text_calls - echoes
    if mode == "native":
        quality.add(name, model, "calls", "native", state.calls - state.text_calls)
        quality.add(name, model, "calls", "text", text)
        if state.text_calls or state.rejected:
            quality.add(name, model, "markup_removed", "tool_calls")
    else:
        quality.add(name, model, "calls", "rescue", text)
    if echoes:
        quality.add(name, model, "markup_removed", "echoes")


def finish_of(reply: Reply, usage: dict[str, Any] | None) -> Finish:
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
        elif not isinstance(item, (Opened, Finish)):
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
