"""Probes of a model server's native endpoints, at the root of its base URL.

The base URL is the one a user gives the openai SDK (``http://host:port/v1``);
Ollama's ``/api/show``, llama.cpp's ``/props`` and LM Studio's
``/api/v1/models`` live beside ``/v1``, not under it. A probe answers True or
False when the server says, and None when it cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import HttpClient


def root_url(base_url: str) -> str:
    """``http://h:11434/v1`` → ``http://h:11434``."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


async def detect_kind(client: HttpClient, root: str) -> str:
    """Which server this is, judged by the native endpoints it answers.

    Raises BackendError when the server cannot be reached at all."""
    for kind, method, path in _SIGNATURES:
        try:
            answer = await client.request_json(method, root + path)
        except BackendError as exc:
            if exc.upstream_status is None:
                raise  # down or silent: nothing learned, ask again next time
            continue
        if kind == "llamacpp" and not (
            isinstance(answer, dict)
            and ("chat_template" in answer or "chat_template_caps" in answer)
        ):
            continue
        return kind
    return "openai"


_SIGNATURES = (
    ("ollama", "GET", "/api/tags"),
    ("llamacpp", "GET", "/props"),
    ("lmstudio", "GET", "/api/v1/models"),
)


async def probe_native_tools(client: HttpClient, root: str, kind: str, model: str) -> bool | None:
    """Whether ``model`` takes native tools on a server of this ``kind``; raises
    BackendError when the server cannot be reached at all."""
    try:
        if kind == "ollama":
            show = await client.request_json("POST", root + "/api/show", {"model": model})
            return ollama_supports_tools(show)
        if kind == "llamacpp":
            return llamacpp_supports_tools(await client.request_json("GET", root + "/props"))
        if kind == "lmstudio":
            listing = await client.request_json("GET", root + "/api/v1/models")
            return lmstudio_supports_tools(listing, model)
    except BackendError as exc:
        if exc.upstream_status is None:
            raise  # down or silent: nothing learned, ask again next time
        return None
    return None


def ollama_supports_tools(show: Any) -> bool | None:
    if not isinstance(show, dict):
        return None
    capabilities = show.get("capabilities")
    template = show.get("template")
    if isinstance(capabilities, list) and "tools" in capabilities:
        return True
    if isinstance(template, str) and ".Tools" in template:
        return True
    if isinstance(capabilities, list) or isinstance(template, str):
        return False
    return None


def llamacpp_supports_tools(props: Any) -> bool | None:
    if not isinstance(props, dict):
        return None
    caps = props.get("chat_template_caps")
    if isinstance(caps, dict):
        for key in ("supports_tools", "supports_tool_calls"):
            if isinstance(caps.get(key), bool):
                return bool(caps[key])
    return None


def lmstudio_supports_tools(listing: Any, model: str) -> bool | None:
    if not isinstance(listing, dict):
        return None
    entries = listing.get("models", listing.get("data"))
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        names = {entry.get(k) for k in ("key", "id", "model_key", "path", "display_name")}
        if model not in names:
            continue
        capabilities = entry.get("capabilities")
        for source in (entry, capabilities if isinstance(capabilities, dict) else {}):
            flag = source.get("trained_for_tool_use")
            if isinstance(flag, bool):
                return flag
        return None
    return None


@dataclass(frozen=True)
class ChatTemplate:
    """A model's chat template as its server shows it: Jinja (llama.cpp) or Go (Ollama)."""

    text: str
    jinja: bool
    bos: str = ""
    eos: str = ""


# The kinds whose servers show their chat templates (to ``chat_template``);
# every other kind's is None without a request.
SHOWS_TEMPLATES = frozenset({"llamacpp", "ollama"})


async def chat_template(
    client: HttpClient, root: str, kind: str, model: str
) -> ChatTemplate | None:
    """The chat template the server applies for ``model``; None when it shows none."""
    try:
        if kind == "llamacpp":
            props = await client.request_json("GET", root + "/props?model=" + quote(model))
            if isinstance(props, dict) and isinstance(props.get("chat_template"), str):
                bos, eos = props.get("bos_token"), props.get("eos_token")
                return ChatTemplate(
                    props["chat_template"],
                    jinja=True,
                    bos=bos if isinstance(bos, str) else "",
                    eos=eos if isinstance(eos, str) else "",
                )
        elif kind == "ollama":
            show = await client.request_json("POST", root + "/api/show", {"model": model})
            if isinstance(show, dict) and isinstance(show.get("template"), str):
                return ChatTemplate(show["template"], jinja=False)
    except BackendError as exc:
        if exc.upstream_status is None:
            raise
    return None


# Each kind's cheapest request that shows the server is up, beside its base URL
# (None: the OpenAI model list under it).
# (vLLM's and SGLang's /health answer with no body, which the JSON reader refuses.)
_ALIVE_PATHS = {"ollama": "/api/tags", "llamacpp": "/health"}


async def check_alive(client: HttpClient, root: str, base: str, kind: str | None) -> None:
    """Raise BackendError unless the server answers its kind's cheap endpoint;
    an HTTP error status below 500 still means it is up (a 401 without a key)."""
    path = _ALIVE_PATHS.get(kind or "")
    try:
        await client.request_json("GET", root + path if path else base + "/models")
    except BackendError as exc:
        if exc.upstream_status is None or exc.upstream_status >= 500:
            raise
