"""The responses ``previous_response_id`` can name: bounded, in this process's memory.

Each stored response keeps the conversation before it as Chat Completions
messages (what the client sent, earlier responses included) beside the
response itself; a follow-up reads the response's output items as the
conversation's next messages (``request.output_messages``), so a stream that
no follow-up names never makes them. The oldest entry goes first once
``capacity`` are kept; nothing survives a restart, and with several workers
each keeps its own.

Both are kept as their JSON, not as objects. A full store drops an entry on
every put, and an entry kept as objects is a graph of dicts, lists and strings
last touched a thousand requests ago: kept so, the store cost a stream with
tools about 20 µs, kept as JSON what it costs switched off (bench/RESULTS.md,
the twentieth round). Two bytes objects are freed at once; a follow-up decodes
what it reads, a copy no later change to a request can reach.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

from toolrelay.jsonbytes import dumps, loads

# What a follow-up reads of a stored response: the conversation before it (Chat
# Completions messages) and the response's output items.
Kept = tuple[list[dict[str, Any]], list[dict[str, Any]]]


class Store(Protocol):
    """Where responses are kept: this process (:class:`ResponseStore`) or Redis
    (:class:`~toolrelay.io.shared.responses.RedisResponseStore`). The front's
    reading is pure, so the conversation a request continues is fetched first
    (:meth:`prefetch`) and then read (:meth:`get`)."""

    capacity: int

    async def prefetch(self, response_id: str) -> None: ...

    def get(self, response_id: str) -> Kept | None: ...

    def put(self, response: dict[str, Any], history: list[dict[str, Any]]) -> None: ...

    async def fetch_response(self, response_id: str) -> dict[str, Any] | None: ...

    async def remove(self, response_id: str) -> bool: ...


def _exact(data: bytes) -> bytes:
    """``data`` copied into bytes of its own length. Behind a gateway serving
    Responses streams, a full store of a thousand held 10 MiB more resident
    memory with orjson's results kept as it returned them than as copies
    (bench/RESULTS.md, the twentieth round; measured, the allocator's part in it
    not pinned down). The copy costs about 0.25 µs a put."""
    return bytes(memoryview(data))


# Compiled, and subclassed by a test's reference store (which keeps the
# conversation whole at ``put``).
@mypyc_attr(allow_interpreted_subclasses=True)
class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Oldest first: id -> (the conversation's JSON, the response's JSON). An
        # OrderedDict, not a dict: a full store drops its oldest entry on every
        # put, and a dict emptied from its front scans the slots left behind to
        # find the next oldest (twice the cost of a put, callgrind).
        self._entries: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()

    def put(self, response: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Keep ``response`` with ``history``, the conversation before it."""
        if self.capacity <= 0:
            return
        entries = self._entries
        response_id = response["id"]
        entries[response_id] = (_exact(dumps(history)), _exact(dumps(response)))
        entries.move_to_end(response_id)  # kept again: now the newest
        while len(entries) > self.capacity:
            entries.popitem(last=False)

    def get(self, response_id: str) -> Kept | None:
        """The conversation before the response and its output, if it is kept."""
        entry = self._entries.get(response_id)
        if entry is None:
            return None
        response: dict[str, Any] = loads(entry[1])
        return loads(entry[0]), response["output"]

    def response(self, response_id: str) -> dict[str, Any] | None:
        entry = self._entries.get(response_id)
        return None if entry is None else loads(entry[1])

    def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None

    async def prefetch(self, response_id: str) -> None:
        """Nothing to fetch: every entry is here."""

    async def fetch_response(self, response_id: str) -> dict[str, Any] | None:
        return self.response(response_id)

    async def remove(self, response_id: str) -> bool:
        return self.delete(response_id)
