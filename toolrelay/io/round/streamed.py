"""The streamed path of a round, in layers as httpx's ``send`` is:

``stream_handling_fallbacks`` -> ``_relay_single_stream``, which opens the
stream with :func:`~.opening.open_handling_refusals` (a coroutine, not a
generator around the relay: a batch passes through one frame fewer), each one
function calling the next. Batches of items come out: ``[Opened()]`` first, the
last batch ending with one :class:`Finish`. The generators only await and yield:
the work between is compiled (:mod:`.opening`, :mod:`.batches`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.round.batches import StreamRead, finish_of
from toolrelay.io.round.complete import complete_handling_required
from toolrelay.io.round.opening import open_handling_refusals
from toolrelay.io.round.request import Opened, RoundRequest, StreamItem, reply_events


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
        req.plan.mode == "required"
        or not req.stream_tools
        # holds_streams holds none whose fact is not held: the fact's lookup (compiled)
        # first spares the common request holds_streams' Python frame.
        or (
            backend.facts.get(req.model, "swallows_streamed_calls")
            and backend.holds_streams(req.model)
        )
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
    yield [*reply_events(reply), finish_of(reply, reply.usage)]


async def _relay_single_stream(
    backend: Backend, req: RoundRequest, counters: Counters, patience: float | None, runs: bool
) -> AsyncGenerator[list[StreamItem], None]:
    """The stream, opened (:func:`open_handling_refusals`) and read into items
    (:class:`StreamRead`: this generator only awaits and yields, its work is
    compiled). Opening it here, not in a generator of its own around this one,
    saves each batch a frame to pass through."""
    mode, (chunks, observed, constraint) = await open_handling_refusals(
        backend, req, counters, patience
    )
    # Inside: a caller that stops right after Opened closes the backend's stream.
    async with chunks:
        yield [Opened(mode)]
        has_tools = req.has_tools  # a property: read once
        if has_tools:
            counters.inc("rounds", mode)
        opened = has_tools and await backend.reasoning_open(req.model, req.body, req.reasoning_open)
        read = StreamRead(backend, req, counters, mode, chunks, observed, constraint, opened, runs)
        try:
            async for batch in chunks:
                out = read.read(batch)
                if out is None:  # the last read: its items go out with the end
                    break
                if out:
                    yield out
        except BackendError as exc:
            read.broke(exc)
            raise
    last = read.end()
    if last is None:  # came back empty: asked once without streaming
        last = read.reasked(await complete_handling_required(backend, req, counters))
    yield last
