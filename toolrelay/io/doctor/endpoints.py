"""What a backend says about itself: its model list and the capability
endpoints of the servers that have them (Ollama ``/api/show``, llama.cpp
``/props``, LM Studio ``/api/v1/models``, vLLM ``/version``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolrelay.io.backends import Backend, BackendError
from toolrelay.io.backends.probe import (
    llamacpp_supports_tools,
    lmstudio_supports_tools,
    ollama_supports_tools,
)

# /v1/models `owned_by` values that name the server (vLLM and SGLang answer no
# native endpoint toolrelay's kind detection knows).
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp"}


@dataclass(frozen=True)
class EndpointReport:
    path: str
    server: str
    # Whether it says the model takes tools; None: it does not say.
    tools: bool | None
    detail: str


@dataclass(frozen=True)
class SelfDescription:
    listed: tuple[str, ...]
    owner: str | None
    endpoints: tuple[EndpointReport, ...]

    def says_tools(self) -> bool | None:
        """The endpoints' verdict on native tools: None when none says or they disagree."""
        verdicts = {e.tools for e in self.endpoints if e.tools is not None}
        return verdicts.pop() if len(verdicts) == 1 else None

    def kind_hint(self) -> str | None:
        """The server kind the model list's ``owned_by`` or ``/version`` gives away."""
        if self.owner in _OWNERS:
            return _OWNERS[self.owner]
        if any(e.path == "/version" for e in self.endpoints):
            return "vllm"
        return None


async def describe(backend: Backend, model: str) -> SelfDescription:
    """Reads the model list and every capability endpoint that answers; raises
    BackendError when the backend cannot be reached at all."""
    try:
        listing = await backend.list_models()
    except BackendError as exc:
        if exc.upstream_status is None:
            raise
        listing = {}  # it answers, but lists nothing
    data = listing.get("data")
    data = data if isinstance(data, list) else []
    entries = [e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)]
    owner = next((e.get("owned_by") for e in entries if e["id"] == model), None)
    reports = []
    for path, method in _ENDPOINTS:
        # The one POST, Ollama's /api/show, asks about a model.
        answer = await _ask(backend, method, path, {"model": model} if method == "POST" else None)
        if answer is not None:
            reports.append(_report(path, answer, model))
    return SelfDescription(
        listed=tuple(e["id"] for e in entries),
        owner=owner if isinstance(owner, str) else None,
        endpoints=tuple(reports),
    )


_ENDPOINTS = (
    ("/api/show", "POST"),
    ("/props", "GET"),
    ("/api/v1/models", "GET"),
    ("/version", "GET"),
)


async def _ask(backend: Backend, method: str, path: str, body: Any) -> Any:
    try:
        return await backend.client.request_json(method, backend.root_url + path, body)
    except BackendError:
        return None  # not this kind of server, or it does not say


def _report(path: str, answer: Any, model: str) -> EndpointReport:
    if path == "/api/show":
        caps = answer.get("capabilities") if isinstance(answer, dict) else None
        detail = f"capabilities: {', '.join(map(str, caps))}" if isinstance(caps, list) else ""
        return EndpointReport(path, "Ollama", ollama_supports_tools(answer), detail)
    if path == "/props":
        caps = answer.get("chat_template_caps") if isinstance(answer, dict) else None
        detail = f"supports_tools: {caps.get('supports_tools')}" if isinstance(caps, dict) else ""
        return EndpointReport(path, "llama.cpp", llamacpp_supports_tools(answer), detail)
    if path == "/api/v1/models":
        tools = lmstudio_supports_tools(answer, model)
        detail = "" if tools is None else f"trained_for_tool_use: {str(tools).lower()}"
        return EndpointReport(path, "LM Studio", tools, detail)
    version = answer.get("version") if isinstance(answer, dict) else None
    return EndpointReport(path, "vLLM", None, f"version {version}" if version else "")
