"""What the stream relay's own work costs per upstream chunk, in process.

One read of 128 content-only SSE lines (as vLLM or ``toolrelay simulate``
writes them) through the gateway's functions: ``ChunkStream`` cutting and
reading the lines (the plain-chunk frame learned from the first line),
``ChunkReader.take`` and each front's encoder (Chat Completions' chunks,
Anthropic Messages' and OpenAI Responses' events), then one join, as the relay
does for a batch. No I/O: the figure is the relay's share of a chunk, not the
sockets' or aiohttp's. Run it from each checkout to compare two (PYTHONPATH
picks the code); the minimum of ``RUNS`` runs is printed, in µs per chunk.

Usage::

    PYTHONPATH=. .venv/bin/python bench/relay_chunk_bench.py
"""

from __future__ import annotations

import time

from toolrelay.io.backends.http import ChunkStream, Limits
from toolrelay.io.round.body import ChunkReader
from toolrelay.io.round.request import Finish, Opened, StreamItem
from toolrelay.server.anthropic.wire import MessageEncoder
from toolrelay.server.chat.wire import ChunkEncoder
from toolrelay.server.responses import ResponseEncoder
from toolrelay.server.responses.wire import ResponseBuilder

RUNS = 15
READS = 400
CHUNKS = 128
_HEAD = (
    b'data: {"id":"chatcmpl-8ab7abea1a4a74c4cb176822","object":"chat.completion.chunk",'
    b'"created":1796222123,"model":"sim/bench","choices":[{"index":0,"delta":'
)
_TAIL = b',"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
LINE = _HEAD + b'{"content":"abcd"}' + _TAIL


def responses_encoder() -> ResponseEncoder:
    """The Responses front's encoder without a front and a turn, which only the
    start and the finish read."""
    encoder = ResponseEncoder.__new__(ResponseEncoder)
    encoder.builder = ResponseBuilder("bench", {}, False)
    encoder.event = encoder.builder.stream_event
    return encoder


ENCODERS = {
    "chat": lambda: ChunkEncoder("bench", include_usage=False),
    "messages": lambda: MessageEncoder("bench", False),
    "responses": responses_encoder,
}


def per_chunk(front: str) -> float:
    """The minimum over the runs of the relay's µs per chunk, for ``front``'s encoder."""
    # The stream's response is never read here: only the lines given to it.
    stream = ChunkStream(None, "bench", Limits(), None, 0.0, plain=True)  # type: ignore[arg-type]
    stream._decode(stream._lines(LINE))  # learns the frame
    data = LINE * CHUNKS
    best = float("inf")
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(READS):
            batch = stream._decode(stream._lines(data))
            encoder = ENCODERS[front]()
            reader = ChunkReader(None, None, None)
            items: list[StreamItem] = []
            for chunk in batch:
                reader.take(chunk, items)
            events = (item for item in items if not isinstance(item, Opened | Finish))
            written = [encoder.event(event) for event in events]
            b"".join(chunk for chunk in written if chunk is not None)
        best = min(best, (time.perf_counter() - started) / READS / CHUNKS * 1e6)
    return best


if __name__ == "__main__":
    for front in ENCODERS:
        print(f"relay's own work, {front}: {per_chunk(front):.3f} µs per content chunk")
