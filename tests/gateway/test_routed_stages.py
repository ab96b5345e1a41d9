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
import itertools
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.inspected import WEATHER
from tests.gateway.rawbackend import Pieces, RawBackend, serving, sse_event
from toolrelay.io.backends.backend import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.round import Finish, RoundRequest, StreamItem, routed
from toolrelay.io.round.staged import staged
from toolrelay.io.settings import Settings
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
