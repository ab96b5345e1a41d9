"""A round on one of a model's backends, tried once more on another when the
first failed before anything reached the client.

The rules (docs/backends.md): the backend is the pool's pick; a failure that
:func:`~toolrelay.io.backends.pool.fails_backend` (down, timed out, a 5xx, a
broken stream) counts against it; such a failure of a finished round, or of a
streamed round before its :class:`Opened` (before the gateway sends its 200),
is retried once on another backend of the pool. Never a second time, never
after a stream opened, never for a 4xx (the request itself is wrong).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextvars import ContextVar

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.pool import Pool, fails_backend
from toolrelay.io.counters import Counters
from toolrelay.io.round.answered import complete_round, stream_round_stages
from toolrelay.io.round.batches import RoutedBatches, passed
from toolrelay.io.round.request import Reply, RoundRequest, StreamItem

log = logging.getLogger("toolrelay.rounds")

# Validation outcomes that say a call came out bad.
_BAD_OUTCOMES = frozenset({"repaired", "dropped", "invalid"})

# The name of the backend the request's last round went to (set as the round
# starts on it; ``-`` before one). Read and set where it is used: a function
# around each is a Python frame more per request.
SERVED_BY: ContextVar[str] = ContextVar("toolrelay_served_by", default="-")


def serving(backend: Backend) -> Backend:
    """``backend``, noted as the one this request's rounds go to (an agent turn's
    backend, chosen once for all its rounds)."""
    SERVED_BY.set(backend.name)
    return backend


class _Tally(Counters):
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


def _retry_on(pool: Pool, req: RoundRequest, failed: Backend, exc: BackendError) -> Backend | None:
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


def _reason(exc: BackendError) -> str:
    return str(exc.upstream_status) if exc.upstream_status else exc.reason or str(exc.status)


async def complete_routed(pool: Pool, req: RoundRequest, counters: Counters) -> Reply:
    """:func:`complete_round` on the pool's pick, tried once more on another on failure."""
    first = pool.choose(req.affinity)
    assert first is not None
    try:
        return await _complete_on(pool, first, req, counters)
    except BackendError as exc:
        second = _retry_on(pool, req, first, exc)
        if second is None:
            raise
        counters.inc("failovers", _reason(exc))
        return await _complete_on(pool, second, req, counters)


async def _complete_on(
    pool: Pool, backend: Backend, req: RoundRequest, counters: Counters
) -> Reply:
    tally = _Tally(counters) if pool.judges_quality and req.has_tools else None
    SERVED_BY.set(backend.name)
    lease = pool.lease(backend)
    try:
        reply = await complete_round(backend, pool.round_for(req, backend), tally or counters)
    except BaseException as exc:
        lease.end(exc)
        raise
    lease.end()
    if tally is not None:
        pool.record_quality(backend, tally.bad or bool(reply.rejected))
    return reply


async def stream_routed(
    pool: Pool,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
    runs: bool = False,
) -> AsyncGenerator[list[StreamItem], None]:
    """:func:`~toolrelay.io.round.answered.stream_round` on the pool's pick; a
    failure before it opened is tried once more on another backend. ``runs``: as
    ``stream_round``'s. The round's stages run in this generator's own loop: a
    generator of their own would cost each batch a hop; the work on each batch is
    :class:`RoutedBatches`' (compiled: this generator only awaits and yields)."""
    backend = pool.choose(req.affinity)
    assert backend is not None
    retried = False
    while True:
        tally = _Tally(counters) if pool.judges_quality and req.has_tools else None
        SERVED_BY.set(backend.name)
        lease = pool.lease(backend)
        items, stages = stream_round_stages(
            backend, pool.round_for(req, backend), tally or counters, patience=patience, runs=runs
        )
        try:
            opened = passed(stages, await items.__anext__())
        except BackendError as exc:
            lease.end(exc)
            await items.aclose()
            again = None if retried else _retry_on(pool, req, backend, exc)
            if again is None:
                raise
            counters.inc("failovers", _reason(exc))
            backend, retried = again, True
            continue
        except BaseException as exc:
            lease.end(exc)
            await items.aclose()
            raise
        break
    routed = RoutedBatches(stages, lease, pool, backend, tally)
    try:
        yield opened
        async for batch in items:
            out = routed.batch(batch)
            if out is None:  # the last batch, through stages that may re-ask
                out = await routed.last(batch)
            if out:  # a batch a stage leaves empty goes no further
                yield out
        lease.end()
    except BaseException as exc:
        lease.end(exc)
        raise
    finally:
        await items.aclose()
