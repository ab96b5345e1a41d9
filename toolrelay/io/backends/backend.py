"""One model server: its OpenAI-compatible API, its kind, and what it can do.

This is the layer the gateway, the agent engine, ``toolrelay chat`` and
``toolrelay doctor`` share; it knows nothing of Starlette or of the client
that asked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.facts import CapabilityCache, Fact
from toolrelay.io.backends.http import ChunkStream, HttpClient, Limits
from toolrelay.io.backends.probe import detect_kind, probe_native_tools, root_url
from toolrelay.io.settings import BackendConfig, ToolMode
from toolrelay.io.urls import split_url

RoundMode = Literal["native", "rescue"]

log = logging.getLogger("toolrelay.backends")

# What each learned fact means for the model's requests, for the log.
_LESSONS: dict[Fact, str] = {
    "native_tools": "takes tools natively",
    "refuses_tools": "refuses tools: its requests with tools now take the rescue path",
    "emits_text_calls": "writes its tool calls as text: they are parsed into tool_calls",
    "swallows_streamed_calls": (
        "loses tool calls in streamed answers: its streamed requests with tools now go "
        "non-streaming"
    ),
}

# Kinds whose native endpoints say whether a model takes tools.
_PROBED_KINDS = frozenset({"ollama", "llamacpp", "lmstudio"})


class Backend:
    # Native rounds with tools and never a call, after which a hint is logged.
    UNCALLED_ROUNDS_HINT = 3

    def __init__(
        self,
        config: BackendConfig,
        *,
        capability_ttl: float = 600.0,
        limits: Limits | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        url = split_url(config.url)
        # Without the URL's userinfo and query: those are credentials, sent by the client.
        self.base_url = url.base
        # The URL as it may be shown (/health, errors, logs): secrets hidden.
        self.shown_url = url.shown
        self.root_url = root_url(self.base_url)
        self.client = HttpClient(
            api_key=config.api_key,
            authorization=url.authorization,
            query=url.query,
            limits=limits,
        )
        self._own_credentials = bool(config.api_key or url.authorization)
        self.facts = CapabilityCache(ttl=capability_ttl)
        self._kind: str | None = None if config.kind == "auto" else config.kind
        self._kind_lock = asyncio.Lock()
        # Per model: native rounds with tools since its last call (None: hint given).
        self._uncalled: dict[str, int | None] = {}

    async def kind(self) -> str:
        """The server's kind, detected once when configured as ``auto``."""
        if self._kind is None:
            async with self._kind_lock:
                if self._kind is None:
                    self._kind = await detect_kind(self.client, self.root_url)
        return self._kind

    @property
    def known_kind(self) -> str | None:
        return self._kind

    def _auth(self, client_auth: str | None) -> str | None:
        # A configured key wins; without one the client's own credentials pass through.
        return None if self._own_credentials else client_auth

    async def complete(self, body: dict[str, Any], *, auth: str | None = None) -> dict[str, Any]:
        """POST ``/chat/completions`` without streaming and return the answer.

        ``auth`` is the client's ``Authorization`` header, used when the
        backend has no ``api_key`` of its own."""
        body = {**body, "stream": False}
        # Servers reject stream_options on a request that does not stream.
        body.pop("stream_options", None)
        answer = await self.client.request_json(
            "POST", self.base_url + "/chat/completions", body, self._auth(auth)
        )
        if not isinstance(answer, dict):
            raise BackendError(502, "backend answered with something other than a JSON object")
        return answer

    async def open_stream(self, body: dict[str, Any], *, auth: str | None = None) -> ChunkStream:
        """POST a streamed ``/chat/completions``; returns once the headers are in."""
        return await self.client.open_stream(
            self.base_url + "/chat/completions", {**body, "stream": True}, self._auth(auth)
        )

    async def stream(
        self, body: dict[str, Any], *, auth: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The chunks of a streamed completion, as dicts."""
        async with await self.open_stream(body, auth=auth) as chunks:
            async for batch in chunks:
                for chunk in batch:
                    yield chunk

    async def list_models(self, *, auth: str | None = None) -> dict[str, Any]:
        """The backend's ``GET /models`` answer, as it gave it."""
        answer = await self.client.request_json(
            "GET", self.base_url + "/models", auth=self._auth(auth)
        )
        if not isinstance(answer, dict):
            raise BackendError(502, "backend's model list is not a JSON object")
        return answer

    async def default_model(self) -> str:
        """The backend's first listed model (for toolrelay's own rounds)."""
        listing = await self.list_models()
        data = listing.get("data")
        if isinstance(data, list):
            for entry in data:
                if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                    return str(entry["id"])
        raise BackendError(502, "backend lists no models")

    async def tool_mode_for(self, model: str, configured: ToolMode | None = None) -> RoundMode:
        """Native or rescue for a request with tools to ``model``.

        ``configured`` (a per-model override) wins over the backend's setting;
        ``auto`` uses what was learned, then the server's own answer, and
        otherwise tries native first (a refusal flips it, see ``learn``).
        """
        mode = configured or self.config.tool_mode
        if mode != "auto":
            return mode
        if self.facts.get(model, "refuses_tools"):
            return "rescue"
        native = self.facts.get(model, "native_tools")
        if native is None:
            kind = await self.kind()
            if kind not in _PROBED_KINDS:
                return "native"
            probed = await probe_native_tools(self.client, self.root_url, kind, model)
            # An inconclusive probe means "native first", cached so as not to ask again.
            native = probed is not False
            self.facts.set(model, "native_tools", native)
            log.info(
                "backend %s, model %s: %s (%s probe)",
                self.name,
                model,
                "native tool calling" if native else "no native tools: the rescue path",
                "inconclusive" if probed is None else kind,
            )
        return "native" if native else "rescue"

    def learn(self, model: str, fact: Fact, value: bool = True) -> None:
        if self.facts.get(model, fact) != value:
            lesson = _LESSONS[fact] if value else f"does not hold: {fact}"
            log.info("backend %s, model %s: learned that it %s", self.name, model, lesson)
        self.facts.set(model, fact, value)

    def count_uncalled_round(self, model: str, called: bool) -> bool:
        """Count a native round with tools; True once per model, when
        ``UNCALLED_ROUNDS_HINT`` such rounds in a row brought no call at all."""
        count = self._uncalled.get(model, 0)
        if count is None:
            return False
        if called:
            # A model that calls sees the tools: nothing to hint at, ever.
            self._uncalled[model] = None
            return False
        count += 1
        self._uncalled[model] = None if count >= self.UNCALLED_ROUNDS_HINT else count
        return count >= self.UNCALLED_ROUNDS_HINT

    def knows(self, model: str, fact: Fact) -> bool:
        return bool(self.facts.get(model, fact))

    async def aclose(self) -> None:
        await self.client.aclose()
