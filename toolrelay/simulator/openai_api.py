"""OpenAI Chat Completions: `POST /v1/chat/completions`, streaming and not.

Shapes and streaming rules follow shared/openai-streaming.md: id, type and
name once per tool-call index, argument fragments after, the usage chunk only
with `stream_options.include_usage`, then `data: [DONE]`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.errors import json_response, openai_error
from toolrelay.simulator.model import Failure, Reply, respond, served_model
from toolrelay.simulator.refusal import refusal
from toolrelay.simulator.request import BadRequest, Turn, openai_turn
from toolrelay.simulator.state import read_json, state_of
from toolrelay.simulator.streaming import ClosingStream, paced, pieces


async def chat_completions(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    try:
        body, digest = await read_json(request)
        if config.status is not None:
            return openai_error(f"simulated failure (status {config.status})", config.status)
        turn = openai_turn(body, config, digest)
    except BadRequest as exc:
        return openai_error(exc.message, 400, exc.param)
    if turn.tools and not config.supports_tools(turn.model):
        return openai_error(f"{turn.model} does not support tools", 400)
    refused = refusal(config, turn, request.url.path)
    if refused is not None:
        return refused
    if turn.constraint is not None and config.constraints == "refuse":
        return openai_error(f"this server does not take '{turn.constraint.field}'", 400)
    reply = respond(config, turn)
    if isinstance(reply, Failure):
        if reply.body is not None:
            return json_response(reply.body, reply.status)
        return openai_error(reply.message, reply.status)
    completion = _Completion("chatcmpl-" + turn.digest, int(time.time()), served_model(turn.model))
    if turn.stream:
        frames = completion.frames(reply, turn, config, swallowed=state.swallows(reply))
        stream = ClosingStream if config.close_after_stream else StreamingResponse
        return stream(
            paced(frames, config),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return json_response(completion.whole(reply))


def _streamed_arguments(arguments: str, config: SimulatorConfig) -> str:
    # --cut-streamed-arguments: a server's streamed tool parser that holds back
    # the end of the arguments and never sends it (the non-streamed answer is whole).
    cut = config.cut_streamed_arguments
    return arguments[: max(len(arguments) - cut, 0)] if cut else arguments


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


class _Completion:
    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self.id = completion_id
        self.created = created
        self.model = model

    def whole(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.content or (None if reply.calls else ""),
        }
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                    # vLLM's field: the stop sequence that ended the text, else null.
                    "stop_reason": reply.stop_reason,
                }
            ],
            "usage": _usage(reply),
        }

    def frames(
        self, reply: Reply, turn: Turn, config: SimulatorConfig, *, swallowed: bool
    ) -> Iterator[bytes]:
        size = config.chunk
        yield self._chunk({"role": "assistant", "content": ""}, turn)
        # A mismatched server-side parser eats the whole round, text included (seed 002, §5).
        if not swallowed:
            for piece in pieces(reply.reasoning, size):
                yield self._chunk({"reasoning_content": piece}, turn)
            for piece in pieces(reply.content, size):
                yield self._chunk({"content": piece}, turn)
            for index, call in enumerate(reply.calls):
                start = {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
                yield self._chunk({"tool_calls": [start]}, turn)
                for piece in pieces(_streamed_arguments(call.arguments, config), size):
                    fragment = {"index": index, "function": {"arguments": piece}}
                    yield self._chunk({"tool_calls": [fragment]}, turn)
        finish = "stop" if swallowed else reply.finish_reason
        yield self._chunk({}, turn, finish, reply.stop_reason)
        if turn.include_usage:
            yield self._event([], turn, _usage(reply))
        yield b"data: [DONE]\n\n"

    def _chunk(
        self,
        delta: dict[str, Any],
        turn: Turn,
        finish_reason: str | None = None,
        stop_reason: str | None = None,
    ) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        if stop_reason is not None:
            choice["stop_reason"] = stop_reason
        return self._event([choice], turn, None)

    def _event(self, choices: list[Any], turn: Turn, usage: dict[str, int] | None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        # The usage key exists only when asked for: null on every chunk but the last.
        if turn.include_usage:
            chunk["usage"] = usage
        return b"data: " + orjson.dumps(chunk) + b"\n\n"
