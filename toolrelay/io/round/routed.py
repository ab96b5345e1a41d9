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

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.pool import Pool
from toolrelay.io.counters import Counters
from toolrelay.io.round.answered import complete_round, stream_round_stages
from toolrelay.io.round.relays import (
    SERVED_BY,
    QualityTally,
    RoutedStream,
    failover_reason,
    retry_on,
)
from toolrelay.io.round.request import Reply, RoundRequest

__all__ = ["SERVED_BY", "complete_routed", "serving", "stream_routed"]


def serving(backend: Backend) -> Backend:
    """``backend``, noted as the one this request's rounds go to (an agent turn's
    backend, chosen once for all its rounds)."""
    SERVED_BY.set(backend.name)
    return backend


async def complete_routed(pool: Pool, req: RoundRequest, counters: Counters) -> Reply:
    """:func:`complete_round` on the pool's pick, tried once more on another on failure."""
    first = pool.choose(req.affinity)
    assert first is not None
    try:
        return await _complete_on(pool, first, req, counters)
    except BackendError as exc:
        second = retry_on(pool, req, first, exc)
        if second is None:
            raise
        counters.inc("failovers", failover_reason(exc))
        return await _complete_on(pool, second, req, counters)


async def _complete_on(
    pool: Pool, backend: Backend, req: RoundRequest, counters: Counters
) -> Reply:
    tally = QualityTally(counters) if pool.judges_quality and req.has_tools else None
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


def stream_routed(
    pool: Pool,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
    runs: bool = False,
) -> RoutedStream:
    """:func:`~toolrelay.io.round.answered.stream_round` on the pool's pick; a
    failure before it opened is tried once more on another backend. ``runs``: as
    ``stream_round``'s. The round's stages run in the relay's own loop: a layer
    of their own would cost each batch a hop. The relay is compiled
    (:class:`~toolrelay.io.round.relays.RoutedStream`); its consumer closes it.
    :func:`stream_round_stages` is read here at each call (a test switches it)."""
    return RoutedStream(pool, req, counters, patience, runs, stream_round_stages)
