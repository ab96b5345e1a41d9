"""The streamed round's two relays, as compiled async iterators.

A streamed request passes two layers that each carry every batch: the routed
layer (:class:`RoutedStream`: the pool's pick, tried once more on another
backend when it failed before it opened) and the stream's own
(:class:`StreamRelay`: the stream opened, its reads made items). Written as
async generators they were interpreted (mypyc does not compile those): every
resumption a Python frame, and the event loop's hooks on each (its weak set of
generators, their finalisation). Here each is a class with its state named, one
``__anext__`` that advances it, and an :meth:`aclose` that does what the
generator's ``finally`` did: mypyc compiles an ``async def __anext__`` into the
type's own slot.

What a generator did by itself is done here by hand: an error ends the
iteration for good (the next ``__anext__`` says ``StopAsyncIteration``), a
closed or finished one closes again as nothing. No weak set holds them and no
finaliser closes one left unclosed: each consumer closes its relay itself
(``aclose`` in a ``finally``, or ``contextlib.aclosing``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol

from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.backends.pool import fails_backend
from toolrelay.io.counters import Counters
from toolrelay.io.round.batches import (
    Batches,
    Ending,
    Judge,
    Lease,
    RoutedBatches,
    Stage,
    StreamRead,
    ends,
    passed,
)
from toolrelay.io.round.complete import complete_handling_required
from toolrelay.io.round.constraints import Constraint
from toolrelay.io.round.observed import ObservedAttempt
from toolrelay.io.round.opening import open_handling_refusals
from toolrelay.io.round.request import Opened, RoundRequest, StreamItem

log = logging.getLogger("toolrelay.rounds")

# Validation outcomes that say a call came out bad.
_BAD_OUTCOMES = frozenset({"repaired", "dropped", "invalid"})

# The name of the backend the request's last round went to (set as the round
# starts on it; ``-`` before one). Read and set where it is used: a function
# around each is a Python frame more per request.
SERVED_BY: ContextVar[str] = ContextVar("toolrelay_served_by", default="-")


class QualityTally(Counters):
    """The gateway's counters, passed through, noting whether a call came out bad."""

    def __init__(self, counters: Counters) -> None:
        super().__init__()
        self._counters = counters
        self.bad = False

    def inc(self, name: str, label: str = "") -> None:
        self.add(name, label, 1)

    def add(self, name: str, label: str, amount: int) -> None:
        if name == "validation" and label in _BAD_OUTCOMES and amount > 0:
            self.bad = True
        self._counters.add(name, label, amount)


class Router(Judge, Protocol):
    """The pool a routed round is asked of (:class:`~toolrelay.io.backends.pool.Pool`):
    a protocol, read by name, as the tests give a pool of their own."""

    @property
    def judges_quality(self) -> bool: ...

    def choose(self, affinity: str | None, exclude: Backend | None = None) -> Backend | None: ...

    def lease(self, backend: Backend) -> Lease: ...

    def round_for(self, req: RoundRequest, backend: Backend) -> RoundRequest: ...


# The round's batches before its stages, and the stages
# (:func:`~toolrelay.io.round.answered.stream_round_stages`, as the routed module
# reads it at each call: a test switches it there).
StagesOf = Callable[..., tuple[Batches, list[Stage]]]


def retry_on(pool: Router, req: RoundRequest, failed: Backend, exc: BackendError) -> Backend | None:
    """The backend to try again on, when ``exc`` allows it and the pool has one."""
    if not fails_backend(exc):
        return None
    again = pool.choose(req.affinity, exclude=failed)
    if again is not None:
        log.warning(
            "model %s: backend %s failed before answering (%s): trying backend %s",
            req.model,
            failed.name,
            exc.message,
            again.name,
        )
    return again


def failover_reason(exc: BackendError) -> str:
    """The failover counter's label for ``exc``."""
    return str(exc.upstream_status) if exc.upstream_status else exc.reason or str(exc.status)


class RoutedStream:
    """:func:`~toolrelay.io.round.answered.stream_round` on the pool's pick; a
    failure before it opened is tried once more on another backend
    (:func:`~toolrelay.io.round.routed.stream_routed` makes it). The round's stages
    run in this loop (:class:`RoutedBatches`), not in a layer of their own.

    Its states: not started (``_started`` false); opened (``_items`` set: the
    round's batches are read, the lease held); ended (``_started`` and no
    ``_items``: by the round's end, an error, or :meth:`aclose`)."""

    def __init__(
        self,
        pool: Router,
        req: RoundRequest,
        counters: Counters,
        patience: float | None,
        runs: bool,
        stages_of: StagesOf,
    ) -> None:
        self._pool = pool
        self._req = req
        self._counters = counters
        self._patience = patience
        self._runs = runs
        self._stages_of = stages_of
        self._started = False
        self._items: Batches | None = None  # the round's batches, while open
        self._lease: Lease | None = None
        self._routed: RoutedBatches | None = None
        self._finished = False  # the round's last batch (with the Finish) went out

    def __aiter__(self) -> RoutedStream:
        return self

    async def __anext__(self) -> list[StreamItem]:
        items = self._items
        if items is None:
            if self._started:
                raise StopAsyncIteration
            self._started = True
            return await self._open()
        lease = self._lease
        routed = self._routed
        assert lease is not None and routed is not None
        try:
            # The round's batch with the Finish is its last: asked again, the round
            # would only end its iteration (in compiled code an exception costs a
            # traceback entry in each function it passes), so it is not asked.
            while not self._finished:
                try:
                    batch = await items.__anext__()
                except StopAsyncIteration:
                    break
                finished = ends(batch)
                out = routed.batch(batch)
                if out is None:  # the last batch, through stages that may re-ask
                    out = await routed.last(batch)
                if out:  # a batch a stage leaves empty goes no further
                    self._finished = finished
                    return out
                if finished:
                    break
            lease.end()
        except BaseException as exc:
            self._items = None
            lease.end(exc)
            await items.aclose()
            raise
        self._items = None
        await items.aclose()
        raise StopAsyncIteration

    async def _open(self) -> list[StreamItem]:
        """The round on the pool's pick up to its :class:`Opened` (through the
        stages), on another backend once when the pick failed."""
        pool, req, counters = self._pool, self._req, self._counters
        backend = pool.choose(req.affinity)
        assert backend is not None
        retried = False
        while True:
            tally = QualityTally(counters) if pool.judges_quality and req.has_tools else None
            SERVED_BY.set(backend.name)
            lease = pool.lease(backend)
            items, stages = self._stages_of(
                backend,
                pool.round_for(req, backend),
                tally or counters,
                patience=self._patience,
                runs=self._runs,
            )
            try:
                opened = passed(stages, await items.__anext__())
            except BackendError as exc:
                lease.end(exc)
                await items.aclose()
                again = None if retried else retry_on(pool, req, backend, exc)
                if again is None:
                    raise
                counters.inc("failovers", failover_reason(exc))
                backend, retried = again, True
                continue
            except BaseException as exc:
                lease.end(exc)
                await items.aclose()
                raise
            break
        self._items, self._lease = items, lease
        self._routed = RoutedBatches(stages, lease, pool, backend, tally)
        return opened

    async def aclose(self) -> None:
        """Closed by its consumer: an open round's lease ended (as by a departure,
        not a success) and its batches closed (the backend's stream with them)."""
        self._started = True
        items, lease = self._items, self._lease
        if items is not None and lease is not None:
            self._items = None
            lease.end(GeneratorExit())
            await items.aclose()


class StreamRelay:
    """A streamed round relayed from its backend's stream, no fallback in the way:
    the stream opened (:func:`open_handling_refusals`), ``[Opened(mode)]``, each
    read's items (:class:`StreamRead`), and the last batch with the
    :class:`Finish` (the empty stream's re-ask included).

    Its states: not started (``_started`` false); open (``_chunks`` set: the
    backend's stream is read, and closed by an error, the stream's end or
    :meth:`aclose`); ended (``_started`` and no ``_chunks``). A consumer that
    stops right after Opened closes the backend's stream with :meth:`aclose`."""

    def __init__(
        self,
        backend: Backend,
        req: RoundRequest,
        counters: Counters,
        patience: float | None,
        runs: bool,
    ) -> None:
        self._backend = backend
        self._req = req
        self._counters = counters
        self._patience = patience
        self._runs = runs
        self._started = False
        self._chunks: ChunkStream | None = None  # the backend's stream, while open
        self._mode: RoundMode = "native"
        self._observed: ObservedAttempt | None = None
        self._constraint: Constraint | None = None
        self._read: StreamRead | None = None  # from the first read after Opened on
        self._drained = False  # the stream's last read came: it is closed, not read again

    def __aiter__(self) -> StreamRelay:
        return self

    async def __anext__(self) -> list[StreamItem]:
        chunks = self._chunks
        if chunks is None:
            if self._started:
                raise StopAsyncIteration
            self._started = True
            mode, (chunks, observed, constraint) = await open_handling_refusals(
                self._backend, self._req, self._counters, self._patience
            )
            self._chunks, self._mode = chunks, mode
            self._observed, self._constraint = observed, constraint
            return [Opened(mode)]
        backend, req, counters = self._backend, self._req, self._counters
        try:
            read = self._read
            if read is None:
                mode = self._mode
                has_tools = req.has_tools  # a property: read once
                if has_tools:
                    counters.inc("rounds", mode)
                opened: bool | None = False
                if has_tools:
                    opened = await backend.reasoning_open(req.model, req.body, req.reasoning_open)
                read = StreamRead(
                    backend,
                    req,
                    counters,
                    mode,
                    chunks,
                    self._observed,
                    self._constraint,
                    opened,
                    self._runs,
                )
                self._read = read
            # Read by name: a test switches ChunkStream.ended (the general path).
            ending: Ending = chunks
            try:
                while not self._drained:
                    try:
                        batch = await chunks.__anext__()
                    except StopAsyncIteration:
                        break
                    out = read.read(batch)
                    if out is None:  # the last read: its items go out with the end
                        break
                    # The read brought the [DONE]: the next would only close the stream
                    # and end its iteration (an exception, dear in compiled code), so
                    # the stream is closed here instead.
                    self._drained = ending.ended
                    if out:
                        return out
            except BackendError as exc:
                read.broke(exc)
                raise
        except BaseException:
            self._chunks = None
            await chunks.aclose()
            raise
        # The stream read to its end is closed before its end is made (the re-ask's
        # wait included), as it was at the end of the generator's ``async with``.
        self._chunks = None
        await chunks.aclose()
        last = read.end()
        if last is None:  # came back empty: asked once without streaming
            last = read.reasked(await complete_handling_required(backend, req, counters))
        return last

    async def aclose(self) -> None:
        """Closed by its consumer: an open stream is closed (the backend's
        connection with it); a relay not started never opens one."""
        self._started = True
        chunks = self._chunks
        if chunks is not None:
            self._chunks = None
            await chunks.aclose()
