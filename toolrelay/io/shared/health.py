"""Backends' health in Redis: a backend one replica takes out is out on all.

When a backend goes out here (:class:`~toolrelay.io.backends.pool.Fleet`), the
time it stays out is written as ``SET key failures PX out_ms`` and published;
when it answers again the key is deleted and that is published. Every replica
applies what it hears to its own copy (requests read only that), and a full
read installs each key with the time it has left. Times travel as durations,
so the replicas' clocks need not agree. Backends are told apart by their base
URL, as the learned facts are.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from toolrelay.balance import Member
from toolrelay.io.backends.backend import Backend
from toolrelay.io.backends.pool import Fleet
from toolrelay.io.shared.outbox import Outbox, live_keys

log = logging.getLogger("toolrelay.shared")

PREFIX = "toolrelay:health:"
CHANNEL = "toolrelay:health"


def health_key(url: str) -> str:
    return PREFIX + url


class SharedHealth(Outbox[str, tuple[float, int]]):
    """Pending: base URL -> (out until, on ``time.time()``; failures)."""

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica
        self._fleet: Fleet | None = None

    def share(self, fleet: Fleet) -> None:
        self._fleet = fleet
        fleet.listeners.append(self._queue)

    def _queue(self, backend: Backend, member: Member) -> None:
        out = member.is_out(time.time())
        if member.failures and not out:
            return  # failures below the threshold: this replica's own business
        self._put(backend.base_url, (member.out_until if out else 0.0, member.failures))

    async def flush(self, client: Redis) -> None:
        """Write and publish the pending changes; raises, keeping them, when Redis fails."""
        writes = dict(self._pending)
        if not writes:
            return
        now = time.time()
        pipe = client.pipeline(transaction=False)
        for url, (until, failures) in writes.items():
            out_ms = max(0, int((until - now) * 1000))
            message = {"replica": self.replica, "backend": url, "out_ms": out_ms}
            if out_ms:
                pipe.set(health_key(url), str(failures).encode(), px=out_ms)
            else:
                pipe.delete(health_key(url))
            pipe.publish(CHANNEL, orjson.dumps({**message, "failures": failures}))
        await pipe.execute()
        self._taken(writes)

    def receive(self, data: bytes) -> None:
        """Apply another replica's word on a backend."""
        try:
            message: dict[str, Any] = orjson.loads(data)
            url, out_ms = str(message["backend"]), int(message["out_ms"])
            failures, replica = int(message["failures"]), message["replica"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("ignored a malformed message on %s: %.200r", CHANNEL, data)
            return
        if replica != self.replica:
            self._apply(url, out_ms, failures)

    async def resync(self, client: Redis) -> None:
        """Install every backend Redis holds as out, with the time it has left."""
        for url, value, ttl_ms in await live_keys(client, PREFIX):
            if url in self._pending:
                continue  # this replica's own word is newer
            try:
                failures = int(value)
            except ValueError:
                continue
            self._apply(url, ttl_ms, failures)

    def _apply(self, url: str, out_ms: int, failures: int) -> None:
        if self._fleet is not None:
            self._fleet.apply_shared(url, out_ms / 1000, failures)
