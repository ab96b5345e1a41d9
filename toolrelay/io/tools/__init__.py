"""Tools toolrelay runs itself: declarative HTTP tools (seed 002) and Python functions.

* :mod:`~toolrelay.io.tools.definition` — the definition format and its checks (pure).
* :mod:`~toolrelay.io.tools.request` — arguments into an HTTP request (pure).
* :mod:`~toolrelay.io.tools.results` — error texts and truncation (pure).
* :mod:`~toolrelay.io.tools.http` — the shared, pooled HTTP client.
* :mod:`~toolrelay.io.tools.toolbox` — the tools of a turn and running one call.
"""

from toolrelay.io.tools.definition import ToolDefinition, ToolDefinitionError, parse_definitions
from toolrelay.io.tools.http import HttpToolClient
from toolrelay.io.tools.request import ArgumentsError, HttpRequest, build_request
from toolrelay.io.tools.results import TRUNCATION_MARK, ToolOutput, truncate
from toolrelay.io.tools.toolbox import FunctionTool, HttpTool, Tool, Toolbox

__all__ = [
    "TRUNCATION_MARK",
    "ArgumentsError",
    "FunctionTool",
    "HttpRequest",
    "HttpTool",
    "HttpToolClient",
    "Tool",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolOutput",
    "Toolbox",
    "build_request",
    "parse_definitions",
    "truncate",
]
