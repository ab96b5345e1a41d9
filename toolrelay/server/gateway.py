"""The gateway's state: settings, backends, counters. One per app."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from toolrelay.io.backends import Backend, BackendError, Backends
from toolrelay.io.counters import Counters
from toolrelay.io.settings import Settings

# /health must answer quickly even when a backend hangs.
_HEALTH_PROBE_TIMEOUT = 2.0


class Gateway:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.backends = Backends(settings)
        self.counters = Counters()
        self.started = time.time()

    async def health(self) -> dict[str, Any]:
        backends = await asyncio.gather(*(_backend_health(b) for b in self.backends))
        return {
            "status": "ok" if all(b["reachable"] for b in backends) else "degraded",
            "uptime_seconds": round(time.time() - self.started, 3),
            "backends": backends,
            "settings": self.settings.public_dict(),
            "counters": self.counters.snapshot(),
        }

    async def aclose(self) -> None:
        await self.backends.aclose()


async def _backend_health(backend: Backend) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": backend.name,
        "url": backend.base_url,
        "kind": backend.known_kind or backend.config.kind,
        "reachable": False,
        "error": None,
        "facts": backend.facts.snapshot(),
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
