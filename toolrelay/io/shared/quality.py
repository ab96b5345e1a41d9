"""Quality routing's verdicts in Redis: a backend one replica finds writing bad
calls for a model gets less traffic from every replica.

A verdict that cuts a weight is written as ``SET key factor PX ttl`` and
published; one that lifts it deletes the key and is published. Each replica
applies the lower of its own factor and the others' (until the TTL runs out:
a replica that made a verdict and went away does not hold a weight down for
ever). Each replica keeps judging from its own window.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.pool import Fleet
from toolrelay.io.shared.outbox import Outbox, live_keys

log = logging.getLogger("toolrelay.shared")

PREFIX = "toolrelay:quality:"
CHANNEL = "toolrelay:quality"
# How long another replica's cut holds without being made again.
TTL_SECONDS = 3600.0


def quality_key(model: str, url: str) -> str:
    # JSON, so that no model name can run into the URL.
    return PREFIX + orjson.dumps([model, url]).decode()


class SharedQuality(Outbox[tuple[str, str], float]):
    """Pending: (model, base URL) -> the factor on the backend's weight."""

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica
        self._fleet: Fleet | None = None

    def share(self, fleet: Fleet) -> None:
        self._fleet = fleet
        fleet.verdict_listeners.append(self._queue)

    def _queue(self, model: str, backend: Backend, factor: float) -> None:
        self._put((model, backend.base_url), factor)

    async def flush(self, client: Redis) -> None:
        """Write and publish the pending verdicts; raises, keeping them, when Redis fails."""
        writes = dict(self._pending)
        if not writes:
            return
        ttl_ms = int(TTL_SECONDS * 1000)
        pipe = client.pipeline(transaction=False)
        for (model, url), factor in writes.items():
            if factor < 1.0:
                pipe.set(quality_key(model, url), str(factor).encode(), px=ttl_ms)
            else:
                pipe.delete(quality_key(model, url))
            message = {"replica": self.replica, "model": model, "backend": url, "factor": factor}
            pipe.publish(CHANNEL, orjson.dumps({**message, "ttl_ms": ttl_ms}))
        await pipe.execute()
        self._taken(writes)

    def receive(self, data: bytes) -> None:
        """Apply another replica's verdict."""
        try:
            message: dict[str, Any] = orjson.loads(data)
            model, url = str(message["model"]), str(message["backend"])
            factor, ttl_ms = float(message["factor"]), int(message["ttl_ms"])
            replica = message["replica"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("ignored a malformed message on %s: %.200r", CHANNEL, data)
            return
        if replica != self.replica and self._fleet is not None:
            self._fleet.apply_shared_verdict(model, url, factor, ttl_ms / 1000)

    async def resync(self, client: Redis) -> None:
        """Install every verdict Redis holds, with the time it has left."""
        if self._fleet is None:
            return
        for name, value, ttl_ms in await live_keys(client, PREFIX):
            try:
                model, url = orjson.loads(name)
                factor = float(value)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                continue
            if (model, url) not in self._pending:
                self._fleet.shared_factors[(model, url)] = (factor, time.time() + ttl_ms / 1000)
