"""One model server: its OpenAI-compatible API, its kind, and what it can do.

This is the layer the gateway, the agent engine, ``toolrelay chat`` and
``toolrelay doctor`` share; it knows nothing of Starlette or of the client
that asked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.facts import EVIDENCE, CapabilityCache, Fact
from toolrelay.io.backends.http import ChunkStream, HttpClient, Limits
from toolrelay.io.backends.probe import (
    SHOWS_TEMPLATES,
    ChatTemplate,
    chat_template,
    detect_kind,
    probe_native_tools,
    root_url,
)
from toolrelay.io.backends.template import go_opens_reasoning, jinja_opens_reasoning
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
    "opens_reasoning": (
        "starts its answers inside reasoning (its chat template opens it): the text "
        "before the closing tag is parsed as reasoning"
    ),
    "takes_json_schema": "decodes under a JSON schema (response_format)",
    "takes_grammar": "decodes under a GBNF grammar (grammar, grammar_lazy)",
    "takes_structural_tag": "decodes under a structural tag (response_format)",
}

# Renderings of chat templates kept (distinct models and chat_template_kwargs).
_TEMPLATE_CACHE = 256


def _kwargs_key(kwargs: dict[str, Any]) -> str:
    return json.dumps(kwargs, sort_keys=True, default=str)


# Kinds whose native endpoints say whether a model takes tools.
_PROBED_KINDS = frozenset({"ollama", "llamacpp", "lmstudio"})


class Backend:
    def __init__(
        self,
        config: BackendConfig,
        *,
        capability_ttl: float = 600.0,
        limits: Limits | None = None,
        learn_facts: bool = True,
        recheck_requests: int = 50,
        recheck_seconds: float = 300.0,
    ) -> None:
        self.config = config
        self.name = config.name
        url = split_url(config.url)
        # Without the URL's userinfo and query: those are credentials, sent by the client.
        self.base_url = url.base
        # Read by the compiled round as attributes (each a Python frame less per
        # round than a method): where its chat requests go, and whether the
        # backend's own credentials replace the client's (see ``auth_for``).
        self.chat_url = self.base_url + "/chat/completions"
        # The URL as it may be shown (/health, errors, logs): secrets hidden.
        self.shown_url = url.shown
        self.root_url = root_url(self.base_url)
        self.client = HttpClient(
            api_key=config.api_key,
            authorization=url.authorization,
            query=url.query,
            limits=limits,
        )
        self.own_credentials = bool(config.api_key or url.authorization)
        self.facts = CapabilityCache(ttl=capability_ttl)
        # False: what answers teach serves their own request only (probes still count).
        self.learn_facts = learn_facts
        # A held-streams fact is tested again after this many requests or seconds.
        self.recheck_requests = recheck_requests
        self.recheck_seconds = recheck_seconds
        # The server's kind once known (``kind`` detects it when configured as ``auto``):
        # the compiled round reads it and awaits ``kind`` only while it is None.
        self.known_kind: str | None = None if config.kind == "auto" else config.kind
        self._kind_lock = asyncio.Lock()
        # Per model: native rounds with tools and no call so far (None: the hint was
        # given, or the model called); counted by the round's ``watch_silence``.
        self.uncalled: dict[str, int | None] = {}
        # Per model: its chat template (None: the server shows none) and until when.
        self._templates: dict[str, tuple[float, ChatTemplate | None]] = {}
        # Per (model, chat_template_kwargs): does the rendered prompt open reasoning?
        self._template_opens: dict[tuple[str, str], bool | None] = {}

    async def kind(self) -> str:
        """The server's kind, detected once when configured as ``auto``."""
        if self.known_kind is None:
            async with self._kind_lock:
                if self.known_kind is None:
                    self.known_kind = await detect_kind(self.client, self.root_url)
        return self.known_kind

    def auth_for(self, client_auth: str | None) -> str | None:
        """The ``Authorization`` a request sends: a configured key wins; without one
        the client's own credentials pass through. (The compiled round writes this
        out from ``own_credentials``.)"""
        return None if self.own_credentials else client_auth

    async def complete(self, body: dict[str, Any], *, auth: str | None = None) -> dict[str, Any]:
        """POST ``/chat/completions`` without streaming and return the answer.

        ``auth`` is the client's ``Authorization`` header, used when the
        backend has no ``api_key`` of its own."""
        body = {**body, "stream": False}
        # Servers reject stream_options on a request that does not stream.
        body.pop("stream_options", None)
        answer = await self.client.request_json("POST", self.chat_url, body, self.auth_for(auth))
        if not isinstance(answer, dict):
            raise BackendError(502, "backend answered with something other than a JSON object")
        return answer

    async def open_stream(
        self, body: dict[str, Any], *, auth: str | None = None, plain: bool = False
    ) -> ChunkStream:
        """POST a streamed ``/chat/completions``; returns once the headers are in.
        ``plain``: content-only chunks come as their text (:class:`ChunkStream`)."""
        return await self.client.open_stream(
            self.chat_url,
            {**body, "stream": True},
            self.auth_for(auth),
            plain=plain,
        )

    async def stream(
        self, body: dict[str, Any], *, auth: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The chunks of a streamed completion, as dicts."""
        async with await self.open_stream(body, auth=auth) as chunks:
            async for batch in chunks:
                for chunk in batch:
                    assert isinstance(chunk, dict)  # opened without plain
                    yield chunk

    async def list_models(self, *, auth: str | None = None) -> dict[str, Any]:
        """The backend's ``GET /models`` answer, as it gave it."""
        answer = await self.client.request_json(
            "GET", self.base_url + "/models", auth=self.auth_for(auth)
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
            kind = self.known_kind or await self.kind()
            if kind not in _PROBED_KINDS:
                return "native"
            probed = await probe_native_tools(self.client, self.root_url, kind, model)
            # An inconclusive probe means "native first", cached so as not to ask again.
            native = probed is not False
            reason = (
                f"the {kind} capability probe was inconclusive: native first"
                if probed is None
                else f"the {kind} capability endpoint says the model "
                + ("takes tools" if native else "takes no tools")
            )
            self.facts.set(model, "native_tools", native, reason)
            log.info(
                "backend %s, model %s: %s (%s probe)",
                self.name,
                model,
                "native tool calling" if native else "no native tools: the rescue path",
                "inconclusive" if probed is None else kind,
            )
        return "native" if native else "rescue"

    async def reasoning_open(
        self, model: str, body: dict[str, Any], configured: bool | None = None
    ) -> bool | None:
        """Whether ``model``'s output for this request starts inside reasoning.

        ``configured`` (the model's ``reasoning_open`` setting) wins; then the
        chat template, where the server shows it (llama.cpp's ``/props``,
        Ollama's ``/api/show``), rendered with the request's
        ``chat_template_kwargs``; then what was learned from an orphan closing
        tag in an earlier answer, unless the request turns thinking off; None
        when none of these says.
        """
        if configured is not None:
            return configured
        kwargs = body.get("chat_template_kwargs")
        if not isinstance(kwargs, dict):
            kwargs = {}
        # Only llama.cpp and Ollama show a template: other kinds are not asked.
        template = (
            await self._chat_template(model)
            if self.known_kind is None or self.known_kind in SHOWS_TEMPLATES
            else None
        )
        if template is not None:
            key = (model, _kwargs_key(kwargs))
            if key not in self._template_opens:
                if len(self._template_opens) >= _TEMPLATE_CACHE:
                    self._template_opens.clear()
                self._template_opens[key] = (
                    jinja_opens_reasoning(template.text, kwargs, template.bos, template.eos)
                    if template.jinja
                    else go_opens_reasoning(template.text)
                )
            opened = self._template_opens[key]
            if opened is not None:
                return opened
        if kwargs.get("enable_thinking") is False or kwargs.get("thinking") is False:
            return False
        # None until learned: the stream holds back what may be reasoning (toolrelay.undecided).
        return self.facts.get(model, "opens_reasoning")

    async def _chat_template(self, model: str) -> ChatTemplate | None:
        """The model's chat template, fetched once per ``capability_ttl``."""
        now = time.monotonic()
        cached = self._templates.get(model)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            kind = await self.kind()
            template = await chat_template(self.client, self.root_url, kind, model)
        except BackendError:
            template = None  # unreachable now: the round itself will say so
        self._templates[model] = (now + self.facts.ttl, template)
        return template

    def learn(self, model: str, fact: Fact, value: bool = True, reason: str | None = None) -> None:
        """Keep what an answer showed (``reason``: the evidence, in words), unless
        learning is switched off (``learn_facts: false``)."""
        if not self.learn_facts:
            return
        if self.facts.get(model, fact) != value:
            lesson = _LESSONS[fact] if value else f"does not hold: {fact}"
            log.info(
                "backend %s, model %s: learned that it %s (%s)",
                self.name,
                model,
                lesson,
                reason or EVIDENCE[fact],
            )
        self.facts.set(model, fact, value, reason)

    def holds_streams(self, model: str) -> bool:
        """Whether ``model``'s streamed rounds with tools are asked without streaming
        because its streams lose calls; every ``recheck_requests`` requests or
        ``recheck_seconds`` one is streamed anyway, to test the fact again."""
        fact: Fact = "swallows_streamed_calls"
        if not self.facts.get(model, fact):
            return False
        if self.facts.recheck_due(model, fact, self.recheck_requests, self.recheck_seconds):
            log.info(
                "backend %s, model %s: streaming a request with tools again, to re-check "
                "that its streams lose tool calls",
                self.name,
                model,
            )
            return False
        return True

    def streamed_call(self, model: str) -> None:
        """A streamed round brought its call: the streams do not lose calls."""
        if self.facts.forget(model, "swallows_streamed_calls"):
            log.info(
                "backend %s, model %s: a streamed answer brought its tool call; forgot that "
                "its streams lose calls, streams are streamed again",
                self.name,
                model,
            )

    def knows(self, model: str, fact: Fact) -> bool:
        return bool(self.facts.get(model, fact))

    async def aclose(self) -> None:
        await self.client.aclose()
