"""The simulator's ASGI app: every server's endpoints at one root."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolrelay.simulator import catalog, ollama_api, openai_api
from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.errors import error_for_path
from toolrelay.simulator.state import SimulatorState


def build_app(config: SimulatorConfig) -> Starlette:
    """The app for `config`; ``app.state.simulator.requests`` logs what it received."""
    routes = [
        Route("/v1/chat/completions", openai_api.chat_completions, methods=["POST"]),
        Route("/v1/models", catalog.openai_models, methods=["GET"]),
        Route("/api/chat", ollama_api.chat, methods=["POST"]),
        Route("/api/show", catalog.ollama_show, methods=["POST"]),
        Route("/api/tags", catalog.ollama_tags, methods=["GET"]),
        Route("/props", catalog.llamacpp_props, methods=["GET"]),
        Route("/api/v1/models", catalog.lmstudio_models, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.simulator = SimulatorState(config)
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    response = error_for_path(request.url.path, exc.detail, exc.status_code)
    response.headers.update(exc.headers or {})
    return response


async def _server_error(request: Request, exc: Exception) -> Response:
    # A bug in the simulator still answers in the API's shape (and is logged).
    return error_for_path(request.url.path, f"simulator error: {exc!r}", 500)
