"""``/openapi.json`` and the ``/docs`` page.

The schema is written out rather than generated from request models, because
the hot path has none (see :mod:`toolrelay.server.chat.request`).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

# Swagger UI's own files, served by the gateway itself: /docs works offline.
SWAGGER_ASSETS = str(files("swagger_ui") / "static")

_ERROR = {
    "description": "An OpenAI error object",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


def _front(summary: str, answer: str) -> dict[str, Any]:
    """A POST endpoint of one of the other wire formats (their bodies are documented
    in docs/, and errors keep each API's own shape)."""
    return {
        "post": {
            "tags": ["chat"],
            "summary": summary,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            "responses": {
                "200": {"description": answer},
                "400": {"description": "The API's own error object"},
                "502": {"description": "The API's own error object"},
            },
        }
    }


def openapi_spec(version: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "toolrelay gateway",
            "version": version,
            "description": (
                "An OpenAI-compatible proxy that makes tool calling work on any model server: "
                "native where the backend does it right, rescued from text where it does not."
            ),
        },
        "paths": {
            "/v1/chat/completions": {
                "post": {
                    "tags": ["chat"],
                    "summary": "Chat completion, streaming or not (OpenAI Chat Completions API)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/ChatRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "A chat.completion object, or an SSE stream of "
                            "chat.completion.chunk objects ending with data: [DONE]",
                            "content": {
                                "application/json": {"schema": {"type": "object"}},
                                "text/event-stream": {"schema": {"type": "string"}},
                            },
                        },
                        "400": _ERROR,
                        "502": _ERROR,
                        "504": _ERROR,
                    },
                }
            },
            "/v1/messages": _front(
                "Message, streaming or not (Anthropic Messages API; docs/anthropic-messages.md)",
                "A message object, or an SSE stream of Messages events",
            ),
            "/v1/messages/count_tokens": _front(
                "An estimate of a Messages request's input tokens (about 4 characters a token)",
                '{"input_tokens": N}',
            ),
            "/v1/responses": _front(
                "Response, streaming or not (OpenAI Responses API; docs/openai-responses.md)",
                "A response object, or an SSE stream of typed response events",
            ),
            "/v1/responses/{response_id}": {
                method: {
                    "tags": ["chat"],
                    "summary": f"{summary} a response kept for previous_response_id",
                    "parameters": [
                        {
                            "name": "response_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": {"description": "The response"}, "404": _ERROR},
                }
                for method, summary in (("get", "Retrieve"), ("delete", "Forget"))
            },
            "/v1/models": {
                "get": {
                    "tags": ["chat"],
                    "summary": "The backends' model lists",
                    "responses": {"200": {"description": "An OpenAI model list"}, "502": _ERROR},
                }
            },
            "/health": {
                "get": {
                    "tags": ["operations"],
                    "summary": "Status, settings in force, backends and counters",
                    "responses": {"200": {"description": "Always answers, backend down or not"}},
                }
            },
            "/metrics": {
                "get": {
                    "tags": ["operations"],
                    "summary": "Counters in the Prometheus text format",
                    "responses": {"200": {"description": "text/plain; version=0.0.4"}},
                }
            },
        },
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "properties": {
                                "message": {"type": "string"},
                                "type": {"type": "string"},
                                "param": {"type": ["string", "null"]},
                                "code": {"type": ["string", "null"]},
                            },
                        }
                    },
                },
                "ChatRequest": {
                    "type": "object",
                    "required": ["model", "messages"],
                    "additionalProperties": True,
                    "properties": {
                        "model": {"type": "string"},
                        "messages": {"type": "array", "items": {"type": "object"}},
                        "tools": {"type": "array", "items": {"type": "object"}},
                        "tool_choice": {"oneOf": [{"type": "string"}, {"type": "object"}]},
                        "parallel_tool_calls": {"type": "boolean"},
                        "stream": {"type": "boolean"},
                        "stream_options": {"type": "object"},
                        "toolrelay_profile": {
                            "type": "string",
                            "description": "Sampling profile: graded, vendor, "
                            "vendor-thinking or antiloop",
                        },
                        "toolrelay_stuck_mode": {
                            "type": "string",
                            "enum": ["enforce", "observe", "off"],
                        },
                        "toolrelay_constrain": {
                            "type": "string",
                            "enum": ["auto", "off", "json_schema", "grammar", "structural_tag"],
                            "description": "Constrained decoding of tool calls "
                            "(docs/constrained.md)",
                        },
                    },
                },
            }
        },
    }


DOCS_PAGE = """<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>toolrelay gateway</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="ui"><p>The OpenAPI document is at <a href="/openapi.json">/openapi.json</a>.</p></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
if (window.SwaggerUIBundle) { SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"}); }
</script>
</body>
</html>
"""
