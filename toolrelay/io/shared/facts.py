"""Learned facts in Redis: one key per (backend, model, fact) that expires with it.

A fact set in this process is in its local cache at once (requests read only
that) and queued; :meth:`SharedFacts.flush` writes it as ``SET key value PX
ttl`` and publishes it, and the other replicas install it with the TTL it has
left. Redis's expiry keeps ``capability_ttl`` across replicas: a full read
(:meth:`SharedFacts.resync`) installs each live key with its ``PTTL``. A
fact seen again (some are, on every request) is shared again only once half
its TTL has passed, or at once after another replica's word on it came in. A
write Redis did not take stays queued until it comes back, unless the fact
expired meanwhile.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, cast

import orjson
from redis.asyncio import Redis

from toolrelay.io.backends.facts import FACTS, SHARED_REASON, CapabilityCache, Fact
from toolrelay.io.shared.outbox import Outbox, live_keys

log = logging.getLogger("toolrelay.shared")

PREFIX = "toolrelay:fact:"
CHANNEL = "toolrelay:facts"


def fact_key(backend: str, model: str, fact: str) -> str:
    # JSON, so that no model name (colons, spaces, anything) can run into the next part.
    return PREFIX + orjson.dumps([backend, model, fact]).decode()


@dataclass(frozen=True)
class _Write:
    backend: str
    model: str
    fact: Fact
    value: bool | None  # None: the fact was forgotten (DELETE /api/facts)
    expires: float  # time.monotonic()
    reason: str = ""


class SharedFacts(Outbox[str, _Write]):
    """The capability caches of this replica's backends, kept in step through Redis.

    Backends are told apart by their base URL, which is the same on every
    replica in front of the same server, whatever each one calls it.
    """

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica
        self._caches: dict[str, CapabilityCache] = {}
        # Per key: the value this replica last shared and when.
        self._sent: dict[str, tuple[bool, float]] = {}

    def share(self, backend: str, cache: CapabilityCache) -> None:
        self._caches[backend] = cache

        def queue(model: str, fact: Fact, value: bool, ttl: float, reason: str) -> None:
            key = fact_key(backend, model, fact)
            now = time.monotonic()
            last = self._sent.get(key)
            if last is not None and last[0] == value and now - last[1] < ttl / 2:
                return  # seen again soon after: not worth a write and a message per request
            self._sent[key] = (value, now)
            self._put(key, _Write(backend, model, fact, value, now + ttl, reason))

        def forget(model: str, fact: Fact) -> None:
            key = fact_key(backend, model, fact)
            self._sent.pop(key, None)
            # Kept until written, however long Redis is away: nothing else would undo the key.
            self._put(key, _Write(backend, model, fact, None, float("inf")))

        cache.on_set = queue
        cache.on_forget = forget

    async def flush(self, client: Redis) -> None:
        """Write and publish the pending facts; raises, keeping them, when Redis fails."""
        writes = dict(self._pending)
        if not writes:
            return
        now = time.monotonic()
        pipe = client.pipeline(transaction=False)
        for key, write in writes.items():
            message: dict[str, Any] = {
                "replica": self.replica,
                "backend": write.backend,
                "model": write.model,
                "fact": write.fact,
            }
            if write.value is None:
                pipe.delete(key)
                pipe.publish(CHANNEL, orjson.dumps({**message, "forget": True}))
                continue
            left_ms = int((write.expires - now) * 1000)
            if left_ms <= 0:
                continue  # expired while it waited: nothing to share
            message.update(value=write.value, ttl_ms=left_ms, reason=write.reason)
            pipe.set(key, b"1" if write.value else b"0", px=left_ms)
            pipe.publish(CHANNEL, orjson.dumps(message))
        await pipe.execute()
        # A fact set again while this write was under way stays for the next one.
        self._taken(writes)

    def receive(self, data: bytes) -> None:
        """Install a fact another replica published."""
        try:
            message = orjson.loads(data)
            backend, model, fact = message["backend"], message["model"], message["fact"]
            replica = message["replica"]
            forget = message.get("forget") is True
            value = None if forget else bool(message["value"])
            ttl_ms = 0 if forget else int(message["ttl_ms"])
            reason = message.get("reason")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            log.warning("ignored a malformed message on %s: %.200r", CHANNEL, data)
            return
        if replica == self.replica:
            return
        if value is None:
            self._forget(backend, model, fact)
        else:
            why = f"{SHARED_REASON}: {reason}" if isinstance(reason, str) and reason else None
            self._install(backend, model, fact, value, ttl_ms, why)

    async def resync(self, client: Redis) -> None:
        """Install every live fact in Redis with the time it has left."""
        for name, value, ttl_ms in await live_keys(client, PREFIX):
            if PREFIX + name in self._pending:
                continue  # ours is newer
            try:
                backend, model, fact = orjson.loads(name)
            except (orjson.JSONDecodeError, ValueError):
                continue
            self._install(backend, model, fact, value == b"1", ttl_ms)

    def _forget(self, backend: Any, model: Any, fact: Any) -> None:
        cache = self._caches.get(backend) if isinstance(backend, str) else None
        if cache is not None and isinstance(model, str) and fact in FACTS:
            self._sent.pop(fact_key(backend, model, fact), None)
            cache.forget(model, cast(Fact, fact), share=False)

    def _install(
        self,
        backend: Any,
        model: Any,
        fact: Any,
        value: bool,
        ttl_ms: int,
        reason: str | None = None,
    ) -> None:
        cache = self._caches.get(backend) if isinstance(backend, str) else None
        if cache is None or not isinstance(model, str) or fact not in FACTS or ttl_ms <= 0:
            return  # a backend this replica does not have, or a fact it does not know
        # Redis holds another replica's word now: the next time this one sees the fact, it says so.
        self._sent.pop(fact_key(backend, model, fact), None)
        cache.apply(model, cast(Fact, fact), value, ttl_ms / 1000, reason or SHARED_REASON)
