"""Tools only the vendor's own servers run, in a request to a model server.

OpenAI's built-in tools (``web_search``, ``file_search``, ``code_interpreter``,
``image_generation``, ``computer_use``, hosted ``mcp``, ...) and Anthropic's
server tools (``web_search_20250305``, ...) are carried out by OpenAI or
Anthropic, not by the client and not by any model server. Codex CLI and
Claude Code send them by default. With ``builtin_tools: drop`` (the default)
they are left out of what the model sees, the answer's ``toolrelay_warning``
names them and the log says so; with ``error`` the request gets a 400.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from toolrelay.io.settings import BuiltinTools
from toolrelay.server.errors import invalid

log = logging.getLogger("toolrelay.server")


@dataclass(frozen=True)
class HostedTool:
    name: str
    # The request field that names it, for the 400 of ``builtin_tools: error``.
    where: str


def hosted_tools(tools: Sequence[HostedTool], mode: BuiltinTools, vendor: str) -> str | None:
    """The warning for the hosted tools left out of the request (None: there were
    none); raises the 400 when ``mode`` is ``error``."""
    if not tools:
        return None
    names = ", ".join(dict.fromkeys(tool.name for tool in tools))
    if mode == "error":
        raise invalid(
            f"'{tools[0].where}': {tools[0].name!r} is one of {vendor} own tools, which run on "
            f"{vendor} servers and no model server runs (builtin_tools is error; with drop, "
            "toolrelay leaves them out).",
            tools[0].where,
        )
    log.info("left out %s hosted tools the model server cannot run: %s", vendor, names)
    return f"left out {vendor} hosted tools, which no model server runs: {names}"
