"""The gateway's state: settings, backends, counters, HTTP tools. One per app."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from toolrelay.io.backends import Backend, BackendError, Backends
from toolrelay.io.counters import process_counters
from toolrelay.io.mcp.config import configured
from toolrelay.io.models import ModelNames
from toolrelay.io.settings import Settings
from toolrelay.io.shared import SharedState
from toolrelay.io.tools import HttpToolClient
from toolrelay.io.tools.registry import (
    MemoryToolStore,
    ToolRegistry,
    ToolStore,
    load_tools_file,
)

if TYPE_CHECKING:
    from toolrelay.io.mcp.servers import McpServers

log = logging.getLogger("toolrelay.gateway")

# /health must answer quickly even when a backend hangs.
_HEALTH_PROBE_TIMEOUT = 2.0


class Gateway:
    def __init__(self, settings: Settings) -> None:
        """Raises :class:`~toolrelay.io.tools.registry.ToolsError` for a bad tools file,
        :class:`~toolrelay.io.mcp.config.McpConfigError` for a bad MCP configuration."""
        self.settings = settings
        self.backends = Backends(settings)
        self.counters = process_counters()
        self.started = time.time()
        # The tools file is read once, here; a bad one stops the start.
        definitions = (
            load_tools_file(settings.tools_file, settings.max_body_bytes)
            if settings.tools_active
            else ()
        )
        # With Redis, replicas share what they learn and the /api/tools override.
        self.shared = (
            SharedState(settings.redis_url, settings.redis_resync) if settings.redis_url else None
        )
        store: ToolStore = MemoryToolStore(definitions)
        if self.shared is not None:
            for backend in self.backends:
                self.shared.facts.share(backend.base_url, backend.facts)
            self.shared.backend_health.share(self.backends.fleet)
            self.shared.quality.share(self.backends.fleet)
            store = self.shared.tool_store(definitions)
        # Loaded only when servers are configured: the MCP SDK is slow to import.
        self.mcp = _mcp_servers(settings) if configured(settings) else None
        self.tools = ToolRegistry(
            store,
            HttpToolClient(
                timeout=settings.tool_timeout_secs,
                follow_redirects=settings.tool_follow_redirects,
            ),
            max_chars=settings.tool_result_max_chars,
            sources=[self.mcp] if self.mcp is not None else [],
        )

    async def health(self) -> dict[str, Any]:
        fleet = self.backends.fleet
        backends = await asyncio.gather(
            *(_backend_health(b, fleet.state(b.name)) for b in self.backends)
        )
        mcp = self.mcp.health() if self.mcp is not None else []
        healthy = all(b["reachable"] for b in backends) and all(s["state"] == "ready" for s in mcp)
        return {
            "status": "ok" if healthy else "degraded",
            "uptime_seconds": round(time.time() - self.started, 3),
            "backends": backends,
            "settings": self.settings.public_dict(),
            "model_names": self.settings.model_names.health(),
            "counters": self.counters.snapshot(),
            # One line per model: "qwen3@vllm: 97.2% valid on arrival, ...".
            "quality": [entry.summary() for entry in self.counters.quality.figures()],
            "shared_state": await self.shared.health() if self.shared else {"store": "memory"},
            "mcp_servers": mcp,
            # Which worker answered: with --workers N the counters are all workers'.
            "process": os.getpid(),
        }

    async def start(self) -> None:
        """Connect to the shared state, when there is one, and start the MCP servers;
        raises :class:`~toolrelay.io.shared.SharedStateError` when the shared state
        cannot be used, :class:`~toolrelay.io.tools.source.SourceStartError` when a server
        does not start (unless ``mcp_optional``)."""
        if self.shared is not None:
            await self.shared.start()
        self.backends.start_checks()
        await self.tools.start()

    async def check_backends(self) -> None:
        """At startup: say what each backend is, or warn that it does not answer."""
        names = self.settings.model_names
        await asyncio.gather(*(_check_backend(b, names) for b in self.backends))

    async def aclose(self) -> None:
        await self.backends.aclose()
        await self.tools.aclose()
        if self.shared is not None:
            await self.shared.aclose()


def _mcp_servers(settings: Settings) -> McpServers:
    from toolrelay.io.mcp.servers import McpServers

    return McpServers.from_settings(settings)


async def _backend_health(backend: Backend, balancing: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": backend.name,
        "url": backend.shown_url,
        "kind": backend.known_kind or backend.config.kind,
        # In service or out (and for how long), its load and error rate (docs/backends.md).
        **balancing,
        "reachable": False,
        "error": None,
        "facts": backend.facts.snapshot(),
        # Each fact with when and why it was learned (DELETE /api/facts forgets them).
        "learned": backend.facts.details(),
    }
    try:
        await asyncio.wait_for(backend.list_models(), _HEALTH_PROBE_TIMEOUT)
        out["reachable"] = True
    except BackendError as exc:
        # An HTTP error (401 without the client's key, say) still means it is up.
        out["reachable"] = exc.upstream_status is not None
        out["error"] = exc.message
    except asyncio.TimeoutError:
        out["error"] = f"no answer within {_HEALTH_PROBE_TIMEOUT} s"
    return out


async def _check_backend(backend: Backend, names: ModelNames) -> None:
    try:
        kind = await asyncio.wait_for(backend.kind(), _HEALTH_PROBE_TIMEOUT)
        names.learn_served(await asyncio.wait_for(backend.list_models(), _HEALTH_PROBE_TIMEOUT))
    except (BackendError, asyncio.TimeoutError) as exc:
        reason = exc.message if isinstance(exc, BackendError) else "no answer in time"
        log.warning(
            "backend %s at %s does not answer (%s): requests to it fail with 502 until it does",
            backend.name,
            backend.shown_url,
            reason,
        )
        return
    log.info("backend %s at %s answers: %s server", backend.name, backend.shown_url, kind)
