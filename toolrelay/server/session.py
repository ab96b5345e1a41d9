"""``WS /ws``: a conversation with the agent loop over a WebSocket (seed 002, section 8).

The client sends ``{"type": "user_text", "text": …}``; for each turn the
server sends, in the order they happen, ``tool_call`` (``id``, ``name``,
``arguments``), ``tool_result`` (``id``, ``name``, the truncated ``content``,
``is_error``), ``assistant_delta`` (``text``: prose, tool-call markup never
included) and, last, ``assistant_end`` (``text``, ``finish_reason`` and
``stuck`` when the loop guard stopped the turn). A message it cannot use gets
an ``error`` event and the connection stays open; so does a backend failure,
followed by the turn's ``assistant_end``.

The conversation lasts as long as the connection, its oldest turns dropped
past ``session_max_turns``. A client that goes away cancels the turn: the
backend request and the tool requests in flight are closed. A speech layer
would consume these events; speech itself is not toolrelay's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any

import orjson
from starlette.websockets import WebSocket

from toolrelay.errors import ToolrelayError
from toolrelay.io import spans
from toolrelay.io.backends.registry import NO_BACKEND
from toolrelay.io.engine import (
    AgentEvent,
    AssistantDelta,
    ToolCallRequested,
    ToolResult,
    TurnEnd,
    run_turn,
)
from toolrelay.io.recording import RequestRecord
from toolrelay.io.round import build_round
from toolrelay.server.agent import loop_config
from toolrelay.server.errors import api_error
from toolrelay.server.gateway import Gateway
from toolrelay.server.inspector import Inspector
from toolrelay.server.turn_watch import CLIENT_GONE, TurnWatch

log = logging.getLogger("toolrelay.session")

USAGE = 'send {"type": "user_text", "text": "..."}'


class Session:
    """One connection's conversation."""

    def __init__(
        self, gateway: Gateway, websocket: WebSocket, inspector: Inspector | None = None
    ) -> None:
        self.gateway = gateway
        self.websocket = websocket
        self.inspector = inspector
        self.history: list[dict[str, Any]] = []
        self._model: str | None = gateway.settings.model
        self._send_lock = asyncio.Lock()

    async def send(self, event: dict[str, Any]) -> None:
        # Turn events and protocol errors come from two tasks: one frame at a time.
        async with self._send_lock:
            await self.websocket.send_text(orjson.dumps(event).decode())

    async def error(self, message: str) -> None:
        await self.send({"type": "error", "message": message})

    async def serve(self) -> None:
        """Read the client's messages until it leaves; one turn at a time."""
        await self.websocket.accept()
        if not self.gateway.backends.configured:
            await self.error(NO_BACKEND)
            await self.websocket.close(code=1011)
            return
        turn: asyncio.Task[None] | None = None
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = _user_text(message)
                if isinstance(text, _Refusal):
                    await self.error(text.reason)
                elif turn is not None and not turn.done():
                    await self.error("a turn is already running: wait for its assistant_end")
                else:
                    turn = asyncio.create_task(self.turn(text))
        finally:
            if turn is not None and not turn.done():
                # The client left: stop the backend request and the tools now.
                turn.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await turn

    async def turn(self, text: str) -> None:
        """One turn, recorded by the inspector and traced (a span with the attempts'
        and tool runs' under it) when they are on."""
        watch = TurnWatch(self.inspector, text)
        with spans.turn_span(self._model or "-", "/ws") as span:
            token = watch.record.enter() if watch.record is not None else None
            try:
                await self._turn(text, watch)
            except asyncio.CancelledError:
                watch.status = CLIENT_GONE
                raise
            finally:
                if token is not None:
                    RequestRecord.leave(token)
                watch.end(span, self._model)

    async def _turn(self, text: str, watch: TurnWatch) -> None:
        gateway = self.gateway
        self.history.append({"role": "user", "content": text})
        self._trim()
        try:
            if self._model is None:
                self._model = await gateway.backends.default.default_model()
            model = self._model
            request = build_round(
                gateway.settings, {"model": model, "messages": list(self.history)}
            )
            toolbox = gateway.tools.toolbox()
            turn = run_turn(
                gateway.backends.for_model(model),
                request,
                toolbox,
                loop_config(gateway.settings, model),
                gateway.counters,
            )
            async with contextlib.aclosing(turn):
                async for event in turn:
                    await self._relay(event, watch)
        except Exception as exc:
            message = api_error(exc, "toolrelay failed to run the turn").message
            if isinstance(exc, ToolrelayError):
                log.warning("agent turn failed: %s", message)
            else:
                # A bug of ours: the client still gets its turn's end.
                log.exception("agent turn failed")
            if self.history and self.history[-1].get("role") == "user":
                self.history.pop()
            watch.status = 500
            await self._emit({"type": "error", "message": f"the turn failed: {message}"}, watch)
            await self._emit({"type": "assistant_end", "text": "", "finish_reason": "error"}, watch)

    async def _emit(self, event: dict[str, Any], watch: TurnWatch) -> None:
        watch.sent(event)
        await self.send(event)

    async def _relay(self, event: AgentEvent, watch: TurnWatch) -> None:
        send = functools.partial(self._emit, watch=watch)
        if isinstance(event, AssistantDelta):
            await send({"type": "assistant_delta", "text": event.text})
        elif isinstance(event, ToolCallRequested):
            call = event.call
            await send(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        elif isinstance(event, ToolResult):
            await send(
                {
                    "type": "tool_result",
                    "id": event.call.id,
                    "name": event.call.name,
                    "content": event.content,
                    "is_error": event.is_error,
                }
            )
        elif isinstance(event, TurnEnd):
            self.history.extend(dict(message) for message in event.messages)
            end: dict[str, Any] = {
                "type": "assistant_end",
                "text": event.content,
                "finish_reason": event.finish_reason,
            }
            if event.stuck is not None:
                end["stuck"] = event.stuck.to_public_dict()
            await send(end)

    def _trim(self) -> None:
        """Drop the oldest turns past the configured number (the new one included)."""
        starts = [i for i, message in enumerate(self.history) if message.get("role") == "user"]
        extra = len(starts) - self.gateway.settings.session_max_turns
        if extra > 0:
            del self.history[: starts[extra]]


class _Refusal:
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _user_text(message: Any) -> str | _Refusal:
    """The text of a ``user_text`` message, or why the message cannot be used."""
    raw = message.get("text")
    if raw is None:
        data = message.get("bytes") or b""
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:
            return _Refusal(f"the message is not UTF-8 text: {USAGE}")
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _Refusal(f"the message is not JSON ({exc}): {USAGE}")
    if not isinstance(decoded, dict):
        return _Refusal(f"the message must be a JSON object: {USAGE}")
    kind = decoded.get("type")
    if kind != "user_text":
        return _Refusal(f"unknown message type {kind!r}: {USAGE}")
    text = decoded.get("text")
    if not isinstance(text, str) or not text.strip():
        return _Refusal(f"'text' must be a non-empty string: {USAGE}")
    return text


async def websocket_endpoint(websocket: WebSocket) -> None:
    state = websocket.app.state
    await Session(state.gateway, websocket, state.inspector).serve()
