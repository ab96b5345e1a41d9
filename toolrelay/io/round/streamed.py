"""The streamed path of a round, in layers as httpx's ``send`` is:

``stream_handling_fallbacks`` -> :class:`~.relays.StreamRelay`, which opens the
stream with :func:`~.opening.open_handling_refusals` (a coroutine, not a layer
around the relay: a batch passes through one frame fewer), each one calling the
next. Batches of items come out: ``[Opened()]`` first, the last batch ending
with one :class:`Finish`. The relay is compiled (:mod:`.relays`, its work on
each read in :mod:`.batches`); the finished reply's stream, rare, stays a
generator here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from toolrelay.io.backends.backend import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.round.batches import Batches, finish_of
from toolrelay.io.round.complete import complete_handling_required
from toolrelay.io.round.relays import StreamRelay
from toolrelay.io.round.request import Opened, RoundRequest, StreamItem, reply_events


def stream_handling_fallbacks(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
    runs: bool = False,
) -> Batches:
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
    return StreamRelay(backend, req, counters, patience, runs)


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
