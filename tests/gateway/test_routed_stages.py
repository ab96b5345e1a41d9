"""The round's stages (the calls checked, the round answered) run in
``stream_routed``'s own loop, not in a generator of their own (``staged``)
between the round and the routed layer: whatever the backend streams (content,
native calls valid, invalid and of unknown tools, blanks, usage, the finish),
however its bytes fall into reads, and whatever the validation setting, the
routed stream gives the same items and leaves the same state (the lease's ends,
the quality record, the counters) as the general path, where ``stream_routed``
reads the stages' own generator; no batch it yields is empty, and only the last
holds the Finish. Real HTTP: a raw backend on 127.0.0.1 writing the generated
stream in the generated pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.inspected import WEATHER
from tests.gateway.rawbackend import Pieces, RawBackend, serving, sse_event
from toolrelay.events import ContentDelta
from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.round import Finish, Opened, RoundRequest, StreamItem, routed
from toolrelay.io.round.batches import RoutedBatches, passed
from toolrelay.io.round.relays import (
    SERVED_BY,
    QualityTally,
    RoutedStream,
    failover_reason,
    retry_on,
)
from toolrelay.io.round.staged import staged
from toolrelay.io.settings import BackendConfig, Settings
from toolrelay.server.gateway import Gateway

_WORDS = st.sampled_from(["Paris is sunny.", "ok", " the", "   ", "\n", "<tool_call>"])


@st.composite
def _call(draw: st.DrawFn, index: int) -> list[bytes]:
    """A native call's chunks: its id and name, then its arguments cut anywhere."""
    name = draw(st.sampled_from(["get_weather", "get_time"]))
    arguments = draw(st.sampled_from(['{"city":"Paris"}', '{"city": 3}', "{}", '{"city":"N']))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(arguments) - 1)), max_size=3)))
    pieces = [arguments[i:j] for i, j in itertools.pairwise([0, *cuts, len(arguments)])]
    head = {"index": index, "id": f"call_{index}", "type": "function"}
    first = sse_event({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
    rest = [
        sse_event({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        for piece in pieces
    ]
    return [first, *rest]


@st.composite
def _stream(draw: st.DrawFn) -> list[bytes]:
    """The backend's SSE stream, cut into the pieces it writes. Words always come
    first (a round that says something is never asked again)."""
    events = [sse_event({"role": "assistant", "content": ""}), sse_event({"content": "Hello."})]
    calls = 0
    for kind in draw(st.lists(st.sampled_from(["text", "call", "usage"]), max_size=5)):
        if kind == "text":
            events.append(sse_event({"content": draw(_WORDS)}))
        elif kind == "call":
            events += draw(_call(calls))
            calls += 1
        else:
            events.append(b'data: {"choices":[],"usage":{"total_tokens":3}}\n\n')
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    events += [sse_event({}, finish), b"data: [DONE]\n\n"]
    body = b"".join(events)
    cuts = sorted(draw(st.sets(st.integers(1, len(body) - 1), max_size=6)))
    return [body[i:j] for i, j in itertools.pairwise([0, *cuts, len(body)])]


_SERVED = Pieces()
_BACKEND = RawBackend(_SERVED)

_serving = serving(_BACKEND)


class _Lease:
    def __init__(self, ends: list[str]) -> None:
        self._ends = ends

    def end(self, error: BaseException | None = None) -> None:
        self._ends.append("end" if error is None else type(error).__name__)


class _Pool:
    """One backend that judges quality: the lease's ends and the records noted."""

    judges_quality = True

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.noted: list[Any] = []

    def choose(self, affinity: str | None, exclude: Backend | None = None) -> Backend | None:
        return None if exclude is not None else self.backend

    def lease(self, backend: Backend) -> _Lease:
        return _Lease(self.noted)

    def round_for(self, req: RoundRequest, backend: Backend) -> RoundRequest:
        return req

    def record_quality(self, backend: Backend, bad: bool) -> None:
        self.noted.append(("quality", bad))


def _stages_in_their_own_generator(*args: Any, **kwargs: Any) -> Any:
    items, stages = _ROUND_STAGES(*args, **kwargs)
    return (staged(items, stages) if stages else items), []


_ROUND_STAGES = routed.stream_round_stages


async def _routed(validate: str, general: bool) -> tuple[list[list[StreamItem]], Any, Any]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "weather?"}],
        "stream": True,
        "tools": [WEATHER],
    }
    gateway = Gateway(Settings(backend=_BACKEND.url + "/v1", backend_kind="openai"))
    pool = _Pool(gateway.backends.pool_for("m").backends[0])
    counters = Counters()
    batches: list[list[StreamItem]] = []
    try:
        with patch.object(
            routed,
            "stream_round_stages",
            _stages_in_their_own_generator if general else _ROUND_STAGES,
        ):
            req = RoundRequest.from_body(body)
            req.validate = validate  # type: ignore[assignment]
            pooled: Any = pool  # the pool's part that stream_routed reads
            stream = routed.stream_routed(pooled, req, counters, patience=None, runs=True)
            try:
                async for batch in stream:
                    batches.append(batch)
                    if isinstance(batch[-1], Finish):
                        # The backend is done with the round: its lease ended and
                        # its quality noted before the client reads the last batch.
                        assert "end" in pool.noted
                        assert any(noted[0] == "quality" for noted in pool.noted)
            finally:
                await stream.aclose()
    finally:
        await gateway.aclose()
    return batches, pool.noted, counters.snapshot()


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pieces=_stream(), validate=st.sampled_from(["warn", "repair", "off"]))
def test_the_stages_in_the_routed_loop_give_the_general_paths_batches(
    pieces: list[bytes], validate: str
) -> None:
    _SERVED.pieces = pieces
    fast, fast_state = _flat(asyncio.run(_routed(validate, general=False)))
    general, general_state = _flat(asyncio.run(_routed(validate, general=True)))
    assert fast == general
    assert fast_state == general_state


def _flat(
    routed_stream: tuple[list[list[StreamItem]], Any, Any],
) -> tuple[list[StreamItem], tuple[Any, Any]]:
    """The stream's items in order, and the state it left. How the backend's bytes
    fell into reads (and so into batches) follows the clock, so two runs are
    compared item by item; every batch holds something (a batch the stages leave
    empty goes no further) and only the last holds the Finish."""
    batches, noted, counters = routed_stream
    assert all(batches)
    assert all(not isinstance(batch[-1], Finish) for batch in batches[:-1])
    assert isinstance(batches[-1][-1], Finish)
    return [item for batch in batches for item in batch], (noted, counters)


# --- the compiled relay against the generator it replaced ---------------------------


async def _generator_routed(
    pool: Any, req: RoundRequest, counters: Counters, stages_of: Any
) -> Any:
    """``stream_routed`` as it was, an async generator: the reference."""
    backend = pool.choose(req.affinity)
    assert backend is not None
    retried = False
    while True:
        tally = QualityTally(counters) if pool.judges_quality and req.has_tools else None
        SERVED_BY.set(backend.name)
        lease = pool.lease(backend)
        items, stages = stages_of(
            backend, pool.round_for(req, backend), tally or counters, patience=None, runs=True
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
    routed_batches = RoutedBatches(stages, lease, pool, backend, tally)
    try:
        yield opened
        async for batch in items:
            out = routed_batches.batch(batch)
            if out is None:
                out = await routed_batches.last(batch)
            if out:
                yield out
        lease.end()
    except BaseException as exc:
        lease.end(exc)
        raise
    finally:
        await items.aclose()


# How an attempt's round goes: how it opens (or fails to), how many batches it
# gives, and how it ends (its Finish, a break mid-stream, a bug, or a wait the
# consumer's task is cancelled in).
_OPENINGS = st.sampled_from(["ok", "ok", "down", "refused", "bug"])
_ENDINGS = st.sampled_from(["finish", "finish", "broke", "bug", "hang"])
_ATTEMPT = st.tuples(_OPENINGS, st.integers(0, 3), _ENDINGS)


class _Dropping:
    """A stage that leaves a batch of "drop" empty, and lets the last through after a wait."""

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        return [item for item in batch if item != ContentDelta("drop")]

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        await asyncio.sleep(0)
        return self.batch(batch)


class _Round:
    """One attempt's scripted batches, noting what is asked of it in ``log``."""

    def __init__(self, attempt: tuple[str, int, str], log: list[Any], hung: asyncio.Event) -> None:
        self._opening, self._count, self._ending = attempt
        self._log, self._hung = log, hung
        self._sent = -1  # batches given after Opened; -1: not opened

    def __aiter__(self) -> _Round:
        return self

    async def __anext__(self) -> list[StreamItem]:
        await asyncio.sleep(0)
        if self._sent < 0:
            self._sent = 0
            if self._opening == "down":
                raise BackendError(502, "down")
            if self._opening == "refused":
                raise BackendError(400, "refused", upstream_status=400)
            if self._opening == "bug":
                raise ValueError("a bug")
            return [Opened("native")]
        if self._sent < self._count:
            self._sent += 1
            return [ContentDelta("drop" if self._sent == 2 else f"c{self._sent}")]
        if self._sent == self._count:
            self._sent += 1
            if self._ending == "broke":
                raise BackendError(502, "broke", reason="reset")
            if self._ending == "bug":
                raise ValueError("a bug")
            if self._ending == "hang":
                self._hung.set()
                await asyncio.Event().wait()
            return [ContentDelta("z"), Finish("stop")]
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._log.append(("round closed", self._opening))


class _Judged(_Pool):
    """Two backends; the lease's ends, the records and the rounds' closes in one log."""

    def __init__(self, backends: list[Backend], judges: bool) -> None:
        super().__init__(backends[0])
        self.backends = backends
        self.judges_quality = judges  # type: ignore[misc]

    def choose(self, affinity: str | None, exclude: Backend | None = None) -> Backend | None:
        return next((b for b in self.backends if b is not exclude), None)


def _stages_of(
    attempts: list[tuple[str, int, str]], log: list[Any], hung: asyncio.Event, staged_: bool
) -> Any:
    left = iter(attempts)

    def stages_of(backend: Backend, req: RoundRequest, counters: Any, **options: Any) -> Any:
        log.append(("asked", backend.name, type(counters).__name__, options))
        return _Round(next(left), log, hung), [_Dropping()] if staged_ else []

    return stages_of


async def _consumed(
    relay: bool,
    attempts: list[tuple[str, int, str]],
    stop_after: int | None,
    staged_: bool,
    judges: bool,
) -> list[Any]:
    log: list[Any] = []
    hung = asyncio.Event()
    config = [
        BackendConfig(url=f"http://127.0.0.{i}:9/v1", kind="openai", name=f"b{i}") for i in (1, 2)
    ]
    pool = _Judged([Backend(c) for c in config], judges)
    req = RoundRequest.from_body(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER]}
    )
    counters = Counters()
    stages_of = _stages_of(attempts, log, hung, staged_)
    stream: Any = (
        RoutedStream(pool, req, counters, None, True, stages_of)
        if relay
        else _generator_routed(pool, req, counters, stages_of)
    )

    async def consume() -> None:
        try:
            if stop_after == 0:
                return
            async for batch in stream:
                log.append(("batch", batch))
                if stop_after is not None and len(log) >= stop_after:
                    break
            log.append(("next after the end", await _next_or_end(stream)))
        except BaseException as exc:
            log.append(("raised", type(exc).__name__, str(exc)))
            raise
        finally:
            await stream.aclose()
            log.append(("closed", await _next_or_end(stream)))

    task = asyncio.ensure_future(consume())
    waiting = asyncio.ensure_future(hung.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if not task.done():  # the round hangs: the client left
        task.cancel()
    waiting.cancel()
    with contextlib.suppress(BaseException):
        await task
    log.append(("noted", pool.noted, counters.snapshot(), SERVED_BY.get()))
    return log


async def _next_or_end(stream: Any) -> str:
    try:
        await stream.__anext__()
    except StopAsyncIteration:
        return "ended"
    return "more"


@settings(max_examples=300, deadline=None)
@given(
    attempts=st.lists(_ATTEMPT, min_size=2, max_size=2),
    stop_after=st.none() | st.integers(0, 8),
    staged_=st.booleans(),
    judges=st.booleans(),
)
def test_the_compiled_relay_does_what_the_generator_did(
    attempts: list[tuple[str, int, str]], stop_after: int | None, staged_: bool, judges: bool
) -> None:
    """Whatever the rounds do (fail before opening, on one backend or both, break,
    raise, hang until the client leaves) and wherever the consumer stops: the same
    batches, errors, lease ends, closes of the round, counters and records as
    the generator ``stream_routed`` was, and the iteration ended after."""
    reference = asyncio.run(_consumed(False, attempts, stop_after, staged_, judges))
    relay = asyncio.run(_consumed(True, attempts, stop_after, staged_, judges))
    assert relay == reference
