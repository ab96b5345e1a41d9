"""``POST /v1/responses``: the OpenAI Responses front, stateless unless asked.

A pure translator around the shared turn (:mod:`toolrelay.server.turn`):
:mod:`.front` is the turn's front, :mod:`.request` reads the body into the
round, :mod:`.wire` writes the response and its typed stream events; errors
keep the OpenAI error object.
Responses are kept for ``previous_response_id`` in a bounded in-memory
:mod:`.store` (in Redis with ``TOOLRELAY_REDIS_URL``) unless the request says
``store: false``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from toolrelay.server.errors import APIError
from toolrelay.server.responses.front import ResponsesFront
from toolrelay.server.responses.store import Store

__all__ = ["ResponsesFront", "stored_routes"]


def stored_routes(store: Store) -> tuple[Any, Any]:
    """``GET`` and ``DELETE /v1/responses/{id}`` on the stored responses."""

    async def retrieve(request: Request) -> Response:
        found = await store.fetch_response(request.path_params["response_id"])
        if found is None:
            return _not_found(request.path_params["response_id"])
        return _json(200, found)

    async def delete(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        if not await store.remove(response_id):
            return _not_found(response_id)
        return _json(200, {"id": response_id, "object": "response", "deleted": True})

    return retrieve, delete


def _not_found(response_id: str) -> Response:
    error = APIError(404, f"Response with id '{response_id}' not found.", param="response_id")
    return _json(404, error.to_dict())


def _json(status: int, body: Any) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")
