"""The inspector's HTTP side: the page at ``/ui`` (assets shipped in the
package) and the JSON API it reads, ``GET /ui/api/requests`` (newest first;
with ``Accept: text/event-stream``, the live list), ``GET
/ui/api/requests/{id}`` and ``GET /ui/api/models``.

The API wants the admin token (``TOOLRELAY_ADMIN_TOKEN``) as a bearer token
when one is set, or one of the API keys; the page itself holds no data and
is open, so that a browser can load it and then send the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from toolrelay.server.auth import admin_refusal, admin_token_accepted
from toolrelay.server.errors import APIError
from toolrelay.server.gateway import Gateway
from toolrelay.server.inspector.ring import Inspector

STATIC = Path(__file__).parent / "static"
# A live list ends after this long and the page opens the next one: an open
# browser tab never holds up the gateway's shutdown (uvicorn waits for every
# response in progress) for longer, nor meets a proxy's idle timeout.
LIVE_SECONDS = 15.0


class InspectorApi:
    def __init__(self, gateway: Gateway, inspector: Inspector) -> None:
        self.gateway = gateway
        self.inspector = inspector

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/ui", self.page, methods=["GET"]),
            Mount("/ui/assets", StaticFiles(directory=STATIC)),
            Route("/ui/api/requests", self.requests, methods=["GET"]),
            Route("/ui/api/requests/{request_id}", self.request, methods=["GET"]),
            Route("/ui/api/models", self.models, methods=["GET"]),
        ]

    async def page(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def requests(self, request: Request) -> Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        if "text/event-stream" in request.headers.get("accept", ""):
            # Watching from before the answer starts: nothing announced after it is missed.
            return StreamingResponse(
                self._live(self.inspector.watch()),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        listed = [record.summary() for record in self.inspector.recent()]
        return _json(200, {"requests": listed})

    async def request(self, request: Request) -> Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        record = self.inspector.records.get(request.path_params["request_id"])
        if record is None:
            error = APIError(404, "No such request among the recent ones", code="no_request")
            return _json(404, error.to_dict())
        return _json(200, record.to_dict())

    async def models(self, request: Request) -> Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        return _json(200, {"models": model_pages(self.gateway)})

    async def _live(self, queue: asyncio.Queue[dict[str, Any] | None]) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LIVE_SECONDS
        try:
            yield b": live\n\n"
            while (left := deadline - loop.time()) > 0:
                try:
                    summary = await asyncio.wait_for(queue.get(), left)
                except asyncio.TimeoutError:
                    return
                if summary is None:
                    return
                yield b"event: request\ndata: " + orjson.dumps(summary) + b"\n\n"
        finally:
            self.inspector.unwatch(queue)

    def _refusal(self, request: Request) -> Response | None:
        settings = self.gateway.settings
        header = request.headers.get("authorization")
        if settings.admin_token and any(
            admin_token_accepted(header, key) for key in settings.api_keys
        ):
            return None
        refused = admin_refusal(header, settings.admin_token, "the inspector")
        if refused is None:
            return None
        return _json(refused.status, refused.to_dict(), {"www-authenticate": "Bearer"})


def model_pages(gateway: Gateway) -> list[dict[str, Any]]:
    """Each model's quality figures and learned facts, by backend then model."""
    pages: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in gateway.counters.quality.figures():
        pages[entry.backend, entry.model] = {**entry.to_dict(), "facts": []}
    for backend in gateway.backends:
        for fact in backend.facts.details():
            key = (backend.name, str(fact.get("model")))
            page = pages.setdefault(
                key, {"backend": backend.name, "model": key[1], "summary": None, "facts": []}
            )
            page["facts"].append(fact)
    return [pages[key] for key in sorted(pages)]


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")
