"""``POST /v1/messages``: the Anthropic Messages front, and ``count_tokens``.

A pure translator around the shared turn (:mod:`toolrelay.server.turn`):
:mod:`.request` reads the body into the round, :mod:`.wire` writes the
message, its stream and errors in Anthropic's shapes.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from toolrelay.io.round import Reply
from toolrelay.io.settings import Settings
from toolrelay.server.anthropic.request import MessagesTurn, read_messages
from toolrelay.server.anthropic.wire import MessageEncoder, error_body, whole_message
from toolrelay.server.asgi import Headers, decode, read_body, send_json, turn_headers
from toolrelay.server.errors import APIError

# A rough rule for English text and JSON: about four characters a token.
_CHARS_PER_TOKEN = 4


class MessagesFront:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def read(self, body: dict[str, Any], headers: Headers) -> MessagesTurn:
        # Unpacked here, not starred into the call: compiled, a starred call goes
        # through the generic calling protocol (an argument tuple built), not a direct one.
        stuck_header, auth = turn_headers(headers)
        return read_messages(body, self.settings, stuck_header, auth)

    def answer(self, turn: MessagesTurn, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
        return whole_message(turn.round.model, turn.thinking, reply, extra)

    def encoder(self, turn: MessagesTurn) -> MessageEncoder:
        return MessageEncoder(turn.round.model, turn.thinking)

    def error(self, error: APIError) -> tuple[int, dict[str, Any]]:
        return error.status, error_body(error)


class CountTokens:
    """``POST /v1/messages/count_tokens``: an estimate, not the model's tokenizer.

    It counts the characters of what the backend would receive (messages and
    tools, as translated) at about four a token, without asking the backend.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            raw = await read_body(receive, self.settings.max_body_bytes)
            turn = read_messages(decode(raw), self.settings, counting=True)
        except APIError as exc:
            await send_json(send, exc.status, error_body(exc))
            return
        await send_json(send, 200, {"input_tokens": estimate_tokens(turn.round.body)})


def estimate_tokens(body: dict[str, Any]) -> int:
    """About how many tokens the messages and tools of a Chat Completions body hold."""
    chars = 0
    for message in body["messages"]:
        chars += len(message["role"]) + _content_chars(message.get("content"))
        for call in message.get("tool_calls") or ():
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    for tool in body.get("tools") or ():
        chars += len(orjson.dumps(tool["function"]))
    return max(1, -(-chars // _CHARS_PER_TOKEN))


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(part.get("text", "")) for part in content if part["type"] == "text")
    return 0
