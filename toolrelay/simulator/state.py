"""Per-simulator state shared by the handlers: the config and the request log."""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.model import Reply
from toolrelay.simulator.request import BadRequest


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the simulator received it, for tests to inspect."""

    method: str
    path: str
    # The decoded JSON body; None when there was none or it was not JSON.
    body: Any
    # The request's headers, names in lower case.
    headers: dict[str, str] = field(default_factory=dict)


class SimulatorState:
    """The config, and the last ``config.request_log`` requests received."""

    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        # Bounded: a long-running simulator (a load test) must not keep every request.
        self.requests: deque[RecordedRequest] = deque(maxlen=config.request_log)
        self._swallowed_once = False

    def swallows(self, reply: Reply) -> bool:
        """Whether a streamed ``reply`` is lost (--swallow-streamed-calls, or its
        ``-once`` variant for the first streamed round holding a call)."""
        if not reply.holds_call():
            return False
        if self.config.swallow_streamed_calls:
            return True
        if self.config.swallow_streamed_calls_once and not self._swallowed_once:
            self._swallowed_once = True
            return True
        return False


def state_of(request: Request) -> SimulatorState:
    state: SimulatorState = request.app.state.simulator
    return state


def record(request: Request, body: Any = None) -> None:
    recorded = RecordedRequest(request.method, request.url.path, body, dict(request.headers))
    state_of(request).requests.append(recorded)


async def read_json(request: Request) -> tuple[Any, str]:
    """The decoded body and a digest of its bytes; records the request."""
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError as exc:
        record(request)
        raise BadRequest(f"the request body is not valid JSON: {exc}") from exc
    record(request, body)
    if body is None:
        raise BadRequest("the request body is empty; expected a JSON object")
    return body, hashlib.blake2b(raw, digest_size=12).hexdigest()
