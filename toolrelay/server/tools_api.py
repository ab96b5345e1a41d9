"""``GET|POST /api/tools``: the HTTP tools in force, and replacing them at runtime.

``POST`` takes the same JSON array as the tools file and installs it in place
of the file's definitions, from the next turn on, in memory only (seed 002,
section 2), or in Redis for every replica with ``TOOLRELAY_REDIS_URL``.
Answers: ``200 {ok, count, source, tools}``; ``400`` for an empty body, text
that is not UTF-8, not a JSON array, or no valid definition; ``401`` without
the admin token when ``TOOLRELAY_ADMIN_TOKEN`` is set (``GET`` too: the
definitions name the tools' servers); ``503`` when no model server is
configured, or when the shared store's Redis does not answer. Errors carry
``ok: false`` and an OpenAI error object. Header values and the URLs'
credentials are never shown: they are third parties' secrets.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from toolrelay.io.backends.registry import NO_BACKEND
from toolrelay.io.tools.registry import (
    ActiveTools,
    ToolsError,
    ToolsUnavailable,
    decode_definitions,
)
from toolrelay.server.auth import admin_refusal
from toolrelay.server.errors import APIError
from toolrelay.server.gateway import Gateway

log = logging.getLogger("toolrelay.tools")


class ToolsApi:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def get(self, request: Request) -> Response:
        if not self.gateway.backends.configured:
            return _error(APIError(503, NO_BACKEND, type="api_error", code="llm_disabled"))
        refused = self._unauthorised(request)
        if refused is not None:
            return refused
        return self._answer(self.gateway.tools.store.active)

    def _unauthorised(self, request: Request) -> Response | None:
        """The 401 for a request without the admin token, when one is set."""
        refused = admin_refusal(
            request.headers.get("authorization"),
            self.gateway.settings.admin_token,
            f"{request.method} /api/tools",
        )
        return None if refused is None else _error(refused, {"www-authenticate": "Bearer"})

    async def post(self, request: Request) -> Response:
        gateway = self.gateway
        if not gateway.backends.configured:
            return _error(APIError(503, NO_BACKEND, type="api_error", code="llm_disabled"))
        refused = self._unauthorised(request)
        if refused is not None:
            return refused
        try:
            raw = await _read(request, gateway.settings.max_body_bytes)
            definitions = decode_definitions(raw)
        except ToolsError as exc:
            return _error(APIError(400, f"Invalid tool definitions: {exc}", code="invalid_tools"))
        except APIError as exc:
            return _error(exc)
        try:
            active = await gateway.tools.store.replace(definitions)
        except ToolsUnavailable as exc:
            log.warning("POST /api/tools refused: %s", exc)
            error = APIError(
                503,
                f"The tools cannot be replaced now: {exc}",
                type="api_error",
                code="tools_store_unavailable",
            )
            return _error(error, {"retry-after": "1"})
        log.info(
            "tool definitions replaced through POST /api/tools: %s",
            ", ".join(definition.name for definition in definitions),
        )
        return self._answer(active)

    def _answer(self, active: ActiveTools) -> Response:
        """The HTTP tools in force (in the file format), then the MCP servers' tools
        (``source: "mcp"``, with their ``server`` and their ``mcp_name``)."""
        # Header values and URL credentials are third parties' secrets: never shown.
        tools = [definition.shown_dict() for definition in active.definitions]
        tools += [tool.to_dict() for tool in self.gateway.tools.sourced(active.definitions)]
        body = {"ok": True, "count": len(tools), "source": active.source, "tools": tools}
        return _json(200, body)


async def _read(request: Request, limit: int) -> bytes:
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise APIError(413, f"The request body exceeds {limit} bytes.", code="body_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _error(error: APIError, headers: dict[str, str] | None = None) -> Response:
    return _json(error.status, {"ok": False, **error.to_dict()}, headers)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _tools_answer(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ToolsAnswer"}}},
    }


def _tools_error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ToolsError"}}},
    }


_DEFINITIONS = {
    "application/json": {
        "schema": {"type": "array", "items": {"$ref": "#/components/schemas/ToolDefinition"}}
    }
}

# /docs: both endpoints under the tag "tools", with their request and response schemas.
OPENAPI_PATHS: dict[str, Any] = {
    "/mcp": {
        "post": {
            "tags": ["tools"],
            "summary": "The HTTP tools in force as an MCP server (streamable HTTP, stateless)",
            "description": "JSON-RPC messages of the Model Context Protocol: tools/list and "
            "tools/call on the HTTP tools (docs/mcp.md). Use an MCP client.",
            "responses": {"200": {"description": "A JSON-RPC answer (JSON or an SSE stream)"}},
        }
    },
    "/api/tools": {
        "get": {
            "tags": ["tools"],
            "summary": "The HTTP tool definitions in force and where they came from, then "
            "the MCP servers' tools (source: mcp)",
            "security": [{"adminToken": []}],
            "responses": {
                "200": _tools_answer(
                    "source: file (LLM_TOOLS_FILE), request (POST) or none; header values "
                    "and the URLs' credentials shown as ***"
                ),
                "401": _tools_error("TOOLRELAY_ADMIN_TOKEN is set and the bearer token is not it"),
                "503": _tools_error("No model server is configured: the LLM is disabled"),
            },
        },
        "post": {
            "tags": ["tools"],
            "summary": "Replace the tool definitions from the next turn on (in memory only)",
            "description": "The body is the same JSON array as a tools file. A turn already "
            "running keeps the tools it started with; a restart restores the file's. With "
            "TOOLRELAY_REDIS_URL the override is kept in Redis for every replica.",
            "security": [{"adminToken": []}],
            "requestBody": {"required": True, "content": _DEFINITIONS},
            "responses": {
                "200": _tools_answer("The definitions now in force (source: request)"),
                "400": _tools_error(
                    "Empty body, not UTF-8, not a JSON array, no tool definition, or an "
                    "invalid entry (the message names the entry, the tool and the field)"
                ),
                "401": _tools_error("TOOLRELAY_ADMIN_TOKEN is set and the bearer token is not it"),
                "413": _tools_error("The body is larger than max_body_bytes"),
                "503": _tools_error(
                    "No model server is configured (the LLM is disabled), or the Redis that "
                    "shares the override between replicas does not answer"
                ),
            },
        },
    },
}

OPENAPI_SCHEMAS: dict[str, Any] = {
    "ToolDefinition": {
        "type": "object",
        "required": ["name", "url"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "description": {"type": "string", "description": "What the model reads"},
            "parameters": {
                "type": "object",
                "description": "JSON Schema of the arguments",
                "default": {"type": "object", "properties": {}},
            },
            "url": {"type": "string", "description": "May hold {arg} placeholders"},
            "method": {
                "type": "string",
                "default": "POST",
                "description": "Any HTTP verb, case-insensitive, custom ones included",
            },
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Sent verbatim; values may hold {arg} placeholders",
            },
        },
    },
    "ToolsAnswer": {
        "type": "object",
        "required": ["ok", "count", "source", "tools"],
        "properties": {
            "ok": {"type": "boolean", "const": True},
            "count": {"type": "integer"},
            "source": {"type": "string", "enum": ["file", "request", "none"]},
            "tools": {
                "type": "array",
                "items": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/ToolDefinition"},
                        {"$ref": "#/components/schemas/McpTool"},
                    ]
                },
            },
        },
    },
    "McpTool": {
        "type": "object",
        "required": ["name", "parameters", "source", "server", "mcp_name"],
        "properties": {
            "name": {"type": "string", "description": "The name the model sees"},
            "description": {"type": "string"},
            "parameters": {"type": "object", "description": "The server's inputSchema"},
            "source": {"type": "string", "const": "mcp"},
            "server": {"type": "string", "description": "The MCP server (--mcp-config)"},
            "mcp_name": {"type": "string", "description": "The tool's name on its server"},
        },
    },
    "ToolsError": {
        "type": "object",
        "required": ["ok", "error"],
        "properties": {
            "ok": {"type": "boolean", "const": False},
            "error": {"$ref": "#/components/schemas/Error/properties/error"},
        },
    },
}

OPENAPI_SECURITY: dict[str, Any] = {
    "adminToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "TOOLRELAY_ADMIN_TOKEN, required by GET and POST /api/tools when it is set",
    }
}


def document(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (the gateway's OpenAPI document) with the tools endpoints added."""
    spec.setdefault("paths", {}).update(OPENAPI_PATHS)
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {}).update(OPENAPI_SCHEMAS)
    components.setdefault("securitySchemes", {}).update(OPENAPI_SECURITY)
    tags = spec.setdefault("tags", [])
    if not any(tag.get("name") == "tools" for tag in tags):
        tags.append({"name": "tools", "description": "HTTP tools toolrelay runs itself"})
    return spec
