"""The OpenAI Responses front itself: the turn's reading, answer and stream
encoder for ``POST /v1/responses`` (compiled with the hot path; the package's
``__init__`` keeps the stored responses' endpoints, which Starlette needs as
Python functions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolrelay.events import Event
from toolrelay.io.round import ContentRun, Finish, Reply
from toolrelay.io.settings import Settings
from toolrelay.server.asgi import Headers, turn_headers
from toolrelay.server.blocks import sse
from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import ResponsesTurn, read_responses
from toolrelay.server.responses.store import Store
from toolrelay.server.responses.wire import (
    KEEPALIVE,
    ResponseBuilder,
    answer_text,
    whole_response,
)


class ResponsesFront:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store

    async def prepare(self, body: dict[str, Any]) -> None:
        """Fetch the response the request continues, for :meth:`read` to find."""
        previous = body.get("previous_response_id")
        if isinstance(previous, str):
            await self.store.prefetch(previous)

    def read(self, body: dict[str, Any], headers: Headers) -> ResponsesTurn:
        # Both headers in one pass, as the other fronts read them; unpacked here,
        # not starred into the call: compiled, a starred call goes through the
        # generic calling protocol (an argument tuple built), not a direct one.
        stuck_header, auth = turn_headers(headers)
        return read_responses(body, self.settings, self.store, stuck_header, auth)

    def answer(self, turn: ResponsesTurn, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
        text = answer_text(reply)  # the message item's, and the kept message's
        response = whole_response(
            turn.round.model,
            turn.echo,
            reply,
            text,
            extra,
            turn.reasoning,
            turn.custom,
            turn.namespaced,
            turn.summary,
        )
        if turn.store:
            self.store.put(response, turn.history)
        return response

    def encoder(self, turn: ResponsesTurn) -> ResponseEncoder:
        return ResponseEncoder(self, turn)

    def error(self, error: APIError) -> tuple[int, dict[str, Any]]:
        return error.status, error.to_dict()

    def keep(self, turn: ResponsesTurn, response: dict[str, Any]) -> None:
        """Store a finished stream's response with the conversation before it,
        when the request lets us (the response's own messages are made when a
        follow-up asks: most streams never get one)."""
        if turn.store:
            self.store.put(response, turn.history)


def _builder(turn: ResponsesTurn) -> ResponseBuilder:
    # Positional: a keyword argument is matched by its name, on every stream.
    return ResponseBuilder(
        turn.round.model,
        turn.echo,
        turn.reasoning,
        turn.custom,
        turn.namespaced,
        turn.summary,
        turn.echoed,
    )


class ResponseEncoder:
    """The SSE bytes of one streamed response (the turn's :class:`Encoder`)."""

    keepalive = KEEPALIVE

    def __init__(self, front: ResponsesFront, turn: ResponsesTurn) -> None:
        self._front = front
        self._turn = turn
        self.builder = _builder(turn)
        # The builder's own methods, not ones calling them: a call less per event.
        self.event: Callable[[Event], bytes | None] = self.builder.stream_event
        self.run: Callable[[ContentRun], bytes | None] = self.builder.stream_run

    def start(self) -> bytes:
        return self.builder.start()

    def finish(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        data = self.builder.finish_bytes(finish, extra)
        self._front.keep(self._turn, self.builder.response)
        return data

    def error(self, error: APIError) -> bytes:
        return sse(self.builder.failed(error))
