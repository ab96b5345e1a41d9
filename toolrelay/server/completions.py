"""``POST /v1/chat/completions``: the OpenAI Chat Completions front, the hot path.

A pure translator: :mod:`toolrelay.server.request` reads the body into the
round, :mod:`toolrelay.server.wire` writes the answer; the turn itself is
:class:`toolrelay.server.turn.TurnRoute`'s.
"""

from __future__ import annotations

from typing import Any

from toolrelay.io.round import Reply
from toolrelay.io.settings import Settings
from toolrelay.server.errors import APIError
from toolrelay.server.request import ChatRequest, read_request
from toolrelay.server.turn import Headers, client_auth, header
from toolrelay.server.wire import ChunkEncoder, completion


class ChatFront:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def read(self, body: dict[str, Any], headers: Headers) -> ChatRequest:
        return read_request(
            body, self.settings, header(headers, b"x-toolrelay-stuck-mode"), client_auth(headers)
        )

    def answer(self, turn: ChatRequest, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
        return completion(reply, turn.round.model, extra)

    def encoder(self, turn: ChatRequest) -> ChunkEncoder:
        return ChunkEncoder(turn.round.model, turn.include_usage)

    def error(self, error: APIError) -> tuple[int, dict[str, Any]]:
        return error.status, error.to_dict()
