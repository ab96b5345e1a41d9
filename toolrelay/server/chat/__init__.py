"""``POST /v1/chat/completions``: the OpenAI Chat Completions front, the hot path.

A pure translator around the shared turn (:mod:`toolrelay.server.turn`):
:mod:`.request` reads the body into the round, :mod:`.wire` writes the
answer; the turn itself is :class:`toolrelay.server.turn.TurnRoute`'s.
"""

from __future__ import annotations

from typing import Any

from toolrelay.io.round import Reply
from toolrelay.io.settings import Settings
from toolrelay.server.asgi import Headers, turn_headers
from toolrelay.server.chat.request import ChatRequest, read_request
from toolrelay.server.chat.wire import ChunkEncoder, completion
from toolrelay.server.errors import APIError


class ChatFront:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def read(self, body: dict[str, Any], headers: Headers) -> ChatRequest:
        # Unpacked here, not starred into the call: compiled, a starred call goes
        # through the generic calling protocol (an argument tuple built), not a direct one.
        stuck_header, auth = turn_headers(headers)
        return read_request(body, self.settings, stuck_header, auth)

    def answer(self, turn: ChatRequest, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
        return completion(reply, turn.round.model, extra)

    def encoder(self, turn: ChatRequest) -> ChunkEncoder:
        return ChunkEncoder(turn.round.model, turn.include_usage)

    def error(self, error: APIError) -> tuple[int, dict[str, Any]]:
        return error.status, error.to_dict()
