"""A server that refuses requests with tools in its own words (``--refuse-tools``).

Real servers refuse native tools with a status and wording of their own:
llama.cpp without ``--jinja`` answers 500 ``tools param requires --jinja
flag`` while its ``/props`` still reports a tool-capable template; LM Studio
sends a template error as an error event inside a 200 stream. The refusal
leaves the capability probes alone: they say what the server claims.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response, StreamingResponse

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.errors import error_for_path, openai_error_body
from toolrelay.simulator.request import Turn


def refusal(config: SimulatorConfig, turn: Turn, path: str) -> Response | None:
    """The refusal of this request, or None when it carries no tools or the switch is off."""
    message = config.refuse_tools
    if message is None or not turn.tools:
        return None
    if turn.stream and config.refuse_tools_in_stream and not path.startswith("/api/"):
        event = orjson.dumps(openai_error_body(message, config.refuse_tools_status))
        return StreamingResponse(
            iter([b"data: " + event + b"\n\n"]), media_type="text/event-stream"
        )
    return error_for_path(path, message, config.refuse_tools_status)
