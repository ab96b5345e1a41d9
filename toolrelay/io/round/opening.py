"""A streamed round's opening: the backend's stream opened in the round's mode,
with its refusals handled, and its first read awaited
(:func:`open_handling_refusals`, which the relay,
:class:`~toolrelay.io.round.relays.StreamRelay`, awaits). Coroutines, not
generators: compiled, as the relay is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.counters import Counters
from toolrelay.io.round.body import backend_body
from toolrelay.io.round.complete import rescued, round_mode
from toolrelay.io.round.constraints import (
    Constraint,
    learn_refused,
    refused,
    round_constraint,
    without,
)
from toolrelay.io.round.observed import ObservedAttempt, observe
from toolrelay.io.round.request import RoundRequest

# The opened stream (its first batch read and given back: ChunkStream.unread),
# what observes the attempt, and the constraint the request carried.
_Opened = tuple[ChunkStream, "ObservedAttempt | None", Constraint | None]


async def open_handling_refusals(
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
        chunks, observed = await _opened(backend, req, mode, body, patience)
    except BackendError as exc:
        if constraint is None or not refused(exc):
            raise
        learn_refused(backend, req, constraint, exc)
        counters.inc("constraints", "refused")
        chunks, observed = await _opened(backend, req, mode, without(body, constraint), patience)
        return chunks, observed, None
    if constraint is not None:
        counters.inc("constraints", constraint.kind)
    return chunks, observed, constraint


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
        # Backend.open_stream written out (its URL, the body streamed, the backend's own
        # credentials winning): two Python frames fewer a round. tests/gateway/
        # test_backend_api.py holds both to the same request.
        chunks = await backend.client.open_stream(
            backend.chat_url,
            {**body, "stream": True},
            None if backend.own_credentials else req.auth,
            plain=observed is None,
        )
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

    # The task's loop, not get_running_loop(): each asking of the running loop is a
    # getpid() system call on CPython 3.11.
    timer = None if patience is None else task.get_loop().call_later(patience, expire)
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
