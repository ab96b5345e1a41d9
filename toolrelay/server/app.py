"""The gateway's ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.io.backends import BackendError
from toolrelay.io.settings import Settings
from toolrelay.io.spans import use_tracer
from toolrelay.io.tools.source import SourceStartError
from toolrelay.server import facts_api as facts_endpoints
from toolrelay.server.anthropic import CountTokens, MessagesFront
from toolrelay.server.auth import ApiKeys
from toolrelay.server.chat import ChatFront
from toolrelay.server.docs import DOCS_PAGE, SWAGGER_ASSETS, openapi_spec
from toolrelay.server.envelope import Envelope
from toolrelay.server.errors import APIError, api_error, upstream
from toolrelay.server.facts_api import FactsApi
from toolrelay.server.gateway import Gateway
from toolrelay.server.inspector import Inspector, InspectorApi
from toolrelay.server.logs import Redactor, secrets_of
from toolrelay.server.mcp import PATH as MCP_PATH
from toolrelay.server.mcp import McpEndpoint
from toolrelay.server.metrics import Metrics
from toolrelay.server.responses import ResponsesFront, stored_routes
from toolrelay.server.responses.store import ResponseStore, Store
from toolrelay.server.session import websocket_endpoint
from toolrelay.server.tools_api import ToolsApi, document
from toolrelay.server.tracing import Traced, make_tracer, traces_wanted
from toolrelay.server.turn import FrontLanes, TurnRoute


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: object) -> bytes:
        return orjson.dumps(content)


ROOT_TEXT = (
    "toolrelay: tool calling that works on any model server.\n"
    "POST /v1/chat/completions, /v1/messages, /v1/responses; GET /v1/models, /health, /docs.\n"
)


def create_app(settings: Settings) -> Starlette:
    gateway = Gateway(settings)
    metrics = Metrics(gateway.counters, settings, gateway.backends)
    tools_api = ToolsApi(gateway)
    mcp = McpEndpoint(gateway.tools, settings.host)
    facts_api = FactsApi(gateway)
    spec = facts_endpoints.document(document(openapi_spec(_version())))

    async def models(request: Request) -> Response:
        data: list[object] = []
        errors: list[BackendError] = []
        auth = request.headers.get("authorization")
        # All at once: a replica that hangs delays the list by its timeout, not more.
        listings = await asyncio.gather(
            *(b.list_models(auth=auth) for b in gateway.backends), return_exceptions=True
        )
        seen: set[object] = set()
        for listing in listings:
            if isinstance(listing, BackendError):
                errors.append(listing)
                continue
            if isinstance(listing, BaseException):
                raise listing
            settings.model_names.learn_served(listing)
            entries = listing.get("data")
            for entry in entries if isinstance(entries, list) else []:
                # Replicas list the same models: each once.
                key = entry.get("id") if isinstance(entry, dict) else None
                if key is None or key not in seen:
                    data.append(entry)
                    seen.add(key)
        if errors and not data:
            error = upstream(errors[0])
            return JSONResponse(error.to_dict(), status_code=error.status)
        # The client names an alias serves, so that a client that checks finds its model.
        data.extend(settings.model_names.listed())
        return JSONResponse({"object": "list", "data": data})

    async def root(request: Request) -> Response:
        # Clients probe the base URL before anything else (Claude Code: HEAD /).
        return Response(ROOT_TEXT, media_type="text/plain; charset=utf-8")

    async def health(request: Request) -> Response:
        return JSONResponse(await gateway.health())

    async def prometheus(request: Request) -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi(request: Request) -> Response:
        return JSONResponse(spec)

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def http_error(request: Request, exc: Exception) -> Response:
        where = f"{request.method} {request.url.path}"
        if isinstance(exc, HTTPException):
            kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
            error = APIError(exc.status_code, f"{exc.detail}: {where}", type=kind)
        else:
            error = api_error(exc, f"internal error: {where}")
        return JSONResponse(error.to_dict(), status_code=error.status)

    startup_failure: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A Redis that cannot be used stops the start (SharedStateError), and so
        # does an MCP server that does not start (a SourceStartError).
        try:
            await gateway.start()
        except SourceStartError as exc:
            startup_failure.append(f"toolrelay serve: {exc}")
            raise
        # In the background: a slow backend must not delay the gateway's start.
        check = asyncio.create_task(gateway.check_backends())
        if tracer is not None:
            use_tracer(tracer)
        yield
        check.cancel()
        if tracer is not None:
            use_tracer(None)
        if inspector is not None:
            inspector.close()
        await mcp.aclose()
        await gateway.aclose()

    inspector = (
        Inspector(
            settings.inspector_requests,
            settings.inspector_entry_bytes,
            Redactor(secrets_of(settings)),
        )
        if settings.inspector
        else None
    )
    tracer = make_tracer() if traces_wanted(settings) else None

    def watched(route: ASGIApp, operation: str | None = "chat") -> ASGIApp:
        if inspector is not None:
            route = inspector.wrap(route)
        return Traced(route, tracer, operation) if tracer is not None else route

    chat = watched(TurnRoute(gateway, ChatFront(settings)))
    messages = watched(TurnRoute(gateway, MessagesFront(settings)))
    store: Store = (
        gateway.shared.response_store(settings.responses_store, settings.responses_ttl)
        if gateway.shared is not None
        else ResponseStore(settings.responses_store)
    )
    responses_front = ResponsesFront(settings, store)
    # Only a shared store has a conversation to fetch before a body is read: with
    # this process's, no coroutine per request for nothing.
    prepare = responses_front.prepare if gateway.shared is not None else None
    responses = watched(TurnRoute(gateway, responses_front, prepare))
    inspector_routes = InspectorApi(gateway, inspector).routes() if inspector is not None else []
    retrieve, delete = stored_routes(store)
    # The fronts' POST endpoints: routes, and the lanes that reach them past the router.
    lanes = {"/v1/chat/completions": chat, "/v1/messages": messages, "/v1/responses": responses}

    def layers(app: ASGIApp) -> ASGIApp:
        # Inside the lanes: only the lifespan and other paths than theirs pass it.
        app = StartupFailure(app, startup_failure)
        # Innermost of the rest: keys, request ids and the access log still apply
        # to the lanes.
        app = FrontLanes(app, lanes)
        if settings.api_keys:
            keys = [*settings.api_keys, *([settings.admin_token] if settings.admin_token else [])]
            app = ApiKeys(app, keys=keys)
        return Envelope(app)

    app = GatewayApp(
        layers,
        routes=[
            *(Route(path, front, methods=["POST"]) for path, front in lanes.items()),
            Route("/v1/messages/count_tokens", CountTokens(settings), methods=["POST"]),
            Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
            Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/", root, methods=["GET", "HEAD"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", prometheus, methods=["GET"]),
            Route("/api/tools", tools_api.get, methods=["GET"]),
            Route("/api/tools", tools_api.post, methods=["POST"]),
            Route("/api/facts", facts_api.get, methods=["GET"]),
            Route("/api/facts", facts_api.delete, methods=["DELETE"]),
            Route("/api/facts/{fact}", facts_api.delete, methods=["DELETE"]),
            WebSocketRoute("/ws", websocket_endpoint),
            Route(MCP_PATH, watched(mcp, operation=None), methods=["GET", "POST", "DELETE"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/docs", docs, methods=["GET"]),
            Mount("/docs/assets", StaticFiles(directory=SWAGGER_ASSETS)),
            *inspector_routes,
        ],
        exception_handlers={HTTPException: http_error, Exception: http_error},
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.inspector = inspector
    return app


class GatewayApp(Starlette):
    """Starlette with the gateway's own layers (``layers``) outside its error
    middleware rather than inside: the fronts' lanes (:class:`FrontLanes`) pass
    one send wrapper (:class:`~toolrelay.server.envelope.Envelope`, which
    answers a bug that escapes with a 500 itself) instead of that one too."""

    def __init__(self, layers: Callable[[ASGIApp], ASGIApp], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.layers = layers

    def build_middleware_stack(self) -> ASGIApp:
        return self.layers(super().build_middleware_stack())


class StartupFailure:
    """A start that fails for a reason the gateway knows (an MCP server that does
    not start) says it in one line, where the ASGI server would print a traceback."""

    def __init__(self, app: ASGIApp, reasons: list[str]) -> None:
        self.app = app
        self.reasons = reasons

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "lifespan":
            return self.app(scope, receive, send)  # handed on: no frame of its own
        return self._lifespan(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_reason(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and self.reasons:
                message = {**message, "message": self.reasons[-1]}
            await send(message)

        await self.app(scope, receive, send_reason)


def _version() -> str:
    try:
        return metadata.version("toolrelay")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def app_from_environment() -> Starlette:
    """The app of one ``toolrelay serve --workers N`` worker: its settings come
    from the environment ``serve`` prepared (flags included) and the config file."""
    from toolrelay.server.logs import configure_logging, secrets_of

    level, _, style = os.environ.get(WORKER_LOGGING, "info:text").partition(":")
    settings = Settings()
    configure_logging(level, style or "text", secrets_of(settings))
    app = create_app(settings)
    settle_collector()
    return app


# The young generation's threshold (Python's default: 700). Requests in flight
# hold containers that reference counting frees when they end; their peaks
# crossed 700 once every 10-30 requests at concurrency 16, for collections that
# found nearly nothing. At 10000 the gateway served 2000 requests without one,
# and held no more memory under 1000 streams (issue 29, bench/RESULTS.md
# "Fifth round: the process").
YOUNG_THRESHOLD = 10_000


def settle_collector() -> None:
    """The garbage collector of a serving process, once its app is built: what
    start-up made (modules, settings, the app) is frozen out of every later
    collection, and the young generation is collected less often. Measured in
    bench/RESULTS.md ("Fifth round: the process"): CPU and memory under load."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])


# Where ``serve`` leaves its log level and format for its workers.
WORKER_LOGGING = "TOOLRELAYSERVE_LOGGING"
