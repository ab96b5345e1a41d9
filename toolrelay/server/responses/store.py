"""The responses ``previous_response_id`` can name: bounded, in this process's memory.

Each stored response keeps its whole conversation as Chat Completions
messages (what the client sent, earlier responses included, then the
response's own output), so a follow-up needs nothing else. The oldest entry
goes first once ``capacity`` are kept; nothing survives a restart, and with
several workers each keeps its own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol


class Store(Protocol):
    """Where responses are kept: this process (:class:`ResponseStore`) or Redis
    (:class:`~toolrelay.io.shared.responses.RedisResponseStore`). The front's
    reading is pure, so the conversation a request continues is fetched first
    (:meth:`prefetch`) and then read (:meth:`get`)."""

    capacity: int

    async def prefetch(self, response_id: str) -> None: ...

    def get(self, response_id: str) -> list[dict[str, Any]] | None: ...

    def put(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None: ...

    async def fetch_response(self, response_id: str) -> dict[str, Any] | None: ...

    async def remove(self, response_id: str) -> bool: ...


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Oldest first. An OrderedDict, not a dict: a full store drops its oldest
        # entry on every put, and a dict emptied from its front scans the slots
        # left behind to find the next oldest (twice the cost of a put, callgrind).
        self._entries: OrderedDict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = OrderedDict()

    def put(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        if self.capacity <= 0:
            return
        entries = self._entries
        response_id = response["id"]
        entries[response_id] = (conversation, response)
        entries.move_to_end(response_id)  # kept again: now the newest
        while len(entries) > self.capacity:
            entries.popitem(last=False)

    def get(self, response_id: str) -> list[dict[str, Any]] | None:
        """The conversation up to and including the response, if it is kept."""
        entry = self._entries.get(response_id)
        return None if entry is None else entry[0]

    def response(self, response_id: str) -> dict[str, Any] | None:
        entry = self._entries.get(response_id)
        return None if entry is None else entry[1]

    def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None

    async def prefetch(self, response_id: str) -> None:
        """Nothing to fetch: every entry is here."""

    async def fetch_response(self, response_id: str) -> dict[str, Any] | None:
        return self.response(response_id)

    async def remove(self, response_id: str) -> bool:
        return self.delete(response_id)
