"""What each kind of shared state has in common: the writes waiting for Redis,
and the full read of its keys."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

from redis.asyncio import Redis

K = TypeVar("K")
V = TypeVar("V")


class Outbox(Generic[K, V]):
    """Writes this replica made and Redis has not taken yet, newest per key."""

    def __init__(self) -> None:
        self._pending: dict[K, V] = {}
        self._queued = asyncio.Event()

    def _put(self, key: K, value: V) -> None:
        self._pending[key] = value
        self._queued.set()

    @property
    def pending(self) -> int:
        """Writes Redis has not taken yet."""
        return len(self._pending)

    async def queued(self) -> None:
        """Return once there is something to write."""
        await self._queued.wait()
        self._queued.clear()

    def requeue(self) -> None:
        """Try the pending writes again (Redis is back)."""
        if self._pending:
            self._queued.set()

    def _taken(self, writes: dict[K, V]) -> None:
        """``writes`` are in Redis: drop those not made again meanwhile."""
        for key, value in writes.items():
            if self._pending.get(key) is value:
                del self._pending[key]


async def live_keys(client: Redis, prefix: str) -> list[tuple[str, bytes, int]]:
    """Every key under ``prefix`` that holds a value with a time to live: its name
    after the prefix, its value and the milliseconds it has left."""
    keys = [key async for key in client.scan_iter(match=prefix + "*", count=1000)]
    if not keys:
        return []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    results = await pipe.execute()
    live = []
    for index, key in enumerate(keys):
        value, ttl_ms = results[2 * index], results[2 * index + 1]
        name = key.decode() if isinstance(key, bytes) else str(key)
        if value is not None and ttl_ms > 0:
            live.append((name[len(prefix) :], value, int(ttl_ms)))
    return live
