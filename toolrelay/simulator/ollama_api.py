"""Ollama's native chat: `POST /api/chat`, NDJSON streaming (the default) and not.

Field names are Ollama's: `message` (with `thinking` and `tool_calls`, whose
arguments are JSON objects), `done`, `done_reason`, the eval counts and
durations in nanoseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.errors import json_response, ollama_error
from toolrelay.simulator.model import Failure, Reply, respond, served_model
from toolrelay.simulator.refusal import refusal
from toolrelay.simulator.request import BadRequest, ollama_turn
from toolrelay.simulator.state import read_json, state_of
from toolrelay.simulator.streaming import paced, pieces

# Plausible, fixed timings: deterministic bodies make simpler tests.
_LOAD_NS = 1_000_000
_PROMPT_NS_PER_TOKEN = 200_000
_EVAL_NS_PER_TOKEN = 20_000_000


async def chat(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    try:
        body, digest = await read_json(request)
        if config.status is not None:
            return ollama_error(f"simulated failure (status {config.status})", config.status)
        turn = ollama_turn(body, config, digest)
    except BadRequest as exc:
        return ollama_error(exc.message, 400)
    if turn.tools and not config.supports_tools(turn.model):
        return ollama_error(f"{turn.model} does not support tools", 400)
    refused = refusal(config, turn, request.url.path)
    if refused is not None:
        return refused
    if turn.constraint is not None and config.constraints == "refuse":
        return ollama_error(f"this server does not take '{turn.constraint.field}'", 400)
    reply = respond(config, turn)
    if isinstance(reply, Failure):
        if reply.body is not None:
            return json_response(reply.body, reply.status)
        return ollama_error(reply.message, reply.status)
    model = served_model(turn.model)
    if turn.stream:
        return StreamingResponse(
            paced(_lines(reply, model, config, swallowed=state.swallows(reply)), config),
            media_type="application/x-ndjson",
        )
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["thinking"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = _tool_calls(reply)
    return json_response(_head(model, message, done=True) | _final_stats(reply))


def _lines(
    reply: Reply, model: str, config: SimulatorConfig, *, swallowed: bool
) -> Iterator[bytes]:
    if not swallowed:
        for piece in pieces(reply.reasoning, config.chunk):
            yield _line(_head(model, {"role": "assistant", "content": "", "thinking": piece}))
        for piece in pieces(reply.content, config.chunk):
            yield _line(_head(model, {"role": "assistant", "content": piece}))
        if reply.calls:
            # Ollama sends the parsed calls whole, never as argument fragments.
            message = {"role": "assistant", "content": "", "tool_calls": _tool_calls(reply)}
            yield _line(_head(model, message))
    yield _line(_head(model, {"role": "assistant", "content": ""}, done=True) | _final_stats(reply))


def _line(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value) + b"\n"


def _head(model: str, message: dict[str, Any], *, done: bool = False) -> dict[str, Any]:
    created_at = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    return {"model": model, "created_at": created_at, "message": message, "done": done}


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "function": {"index": index, "name": call.name, "arguments": call.arguments_object()},
        }
        for index, call in enumerate(reply.calls)
    ]


def _final_stats(reply: Reply) -> dict[str, Any]:
    prompt_ns = reply.prompt_tokens * _PROMPT_NS_PER_TOKEN
    eval_ns = reply.completion_tokens * _EVAL_NS_PER_TOKEN
    return {
        # Ollama says "stop" for tool-call rounds too; only truncation differs.
        "done_reason": "length" if reply.finish_reason == "length" else "stop",
        "total_duration": _LOAD_NS + prompt_ns + eval_ns,
        "load_duration": _LOAD_NS,
        "prompt_eval_count": reply.prompt_tokens,
        "prompt_eval_duration": prompt_ns,
        "eval_count": reply.completion_tokens,
        "eval_duration": eval_ns,
    }
