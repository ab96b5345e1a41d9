"""The responses ``previous_response_id`` can name: bounded, in this process's memory.

Each stored response keeps its whole conversation as Chat Completions
messages (what the client sent, earlier responses included, then the
response's own output), so a follow-up needs nothing else. The oldest entry
goes first once ``capacity`` are kept; nothing survives a restart, and with
several workers each keeps its own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = OrderedDict()

    def put(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> None:
        if self.capacity <= 0:
            return
        self._entries[response["id"]] = (conversation, response)
        self._entries.move_to_end(response["id"])
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get(self, response_id: str) -> list[dict[str, Any]] | None:
        """The conversation up to and including the response, if it is kept."""
        entry = self._entries.get(response_id)
        return None if entry is None else entry[0]

    def response(self, response_id: str) -> dict[str, Any] | None:
        entry = self._entries.get(response_id)
        return None if entry is None else entry[1]

    def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None
