"""SharedFacts on a real Redis: what a fact set here costs in writes, and when it is said again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
from redis.asyncio import Redis

from tests.shared.redis_server import RedisServer
from toolrelay.io.backends.facts import CapabilityCache
from toolrelay.io.shared.facts import SharedFacts, fact_key

BACKEND = "http://127.0.0.1:9/v1"

Scenario = Callable[[Redis, SharedFacts, CapabilityCache], Awaitable[None]]


def run(redis_server: RedisServer, ttl: float, scenario: Scenario) -> None:
    """Run ``scenario`` with a client of the server and one backend's cache shared through it."""

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        try:
            shared = SharedFacts("here")
            cache = CapabilityCache(ttl=ttl)
            shared.share(BACKEND, cache)
            await scenario(client, shared, cache)
        finally:
            await client.aclose()

    asyncio.run(main())


def other_replica_says(value: bool) -> bytes:
    message = {"replica": "other", "backend": BACKEND, "model": "m"}
    return orjson.dumps({**message, "fact": "native_tools", "value": value, "ttl_ms": 60_000})


def test_a_fact_seen_on_every_request_is_written_once_and_again_after_news(
    redis_server: RedisServer,
) -> None:
    async def scenario(client: Redis, shared: SharedFacts, cache: CapabilityCache) -> None:
        for _ in range(100):
            cache.set("m", "native_tools", True)
        assert shared.pending == 1
        await shared.flush(client)
        assert shared.pending == 0
        assert await client.get(fact_key(BACKEND, "m", "native_tools")) == b"1"
        # The same value again, well within half the TTL: no write.
        cache.set("m", "native_tools", True)
        assert shared.pending == 0
        # A change is news: written at once.
        cache.set("m", "native_tools", False)
        assert shared.pending == 1
        await shared.flush(client)
        assert await client.get(fact_key(BACKEND, "m", "native_tools")) == b"0"
        # Another replica's word came in; this one sees False again and says so.
        shared.receive(other_replica_says(True))
        assert cache.get("m", "native_tools") is True
        cache.set("m", "native_tools", False)
        assert shared.pending == 1

    run(redis_server, 60, scenario)


def test_a_fact_is_said_again_once_half_its_ttl_has_passed(redis_server: RedisServer) -> None:
    async def scenario(client: Redis, shared: SharedFacts, cache: CapabilityCache) -> None:
        cache.set("m", "refuses_tools", True)
        await shared.flush(client)
        await asyncio.sleep(1.2)
        cache.set("m", "refuses_tools", True)
        assert shared.pending == 1
        await shared.flush(client)
        ttl = await client.pttl(fact_key(BACKEND, "m", "refuses_tools"))
        # Renewed for the whole TTL (the first write has < 800 ms left); a second of
        # margin, so that a loaded machine does not fail it.
        assert 1000 < ttl <= 2000

    run(redis_server, 2.0, scenario)


def test_a_forgotten_fact_leaves_redis_and_the_other_replicas(redis_server: RedisServer) -> None:
    async def scenario(client: Redis, shared: SharedFacts, cache: CapabilityCache) -> None:
        cache.set("m", "swallows_streamed_calls", True, "a stream lost its call")
        await shared.flush(client)
        key = fact_key(BACKEND, "m", "swallows_streamed_calls")
        assert await client.get(key) == b"1"
        pubsub = client.pubsub()
        await pubsub.subscribe("toolrelay:facts")
        assert cache.forget("m") == [("m", "swallows_streamed_calls", True)]
        assert shared.pending == 1
        await shared.flush(client)
        assert await client.get(key) is None
        message = None
        for _ in range(20):
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message is not None:
                break
        assert message is not None
        said = orjson.loads(message["data"])
        assert said["forget"] is True and said["fact"] == "swallows_streamed_calls"
        await pubsub.aclose()
        # Another replica's fact comes with its reason; its forget removes it here.
        shared.receive(
            orjson.dumps(
                {
                    "replica": "other",
                    "backend": BACKEND,
                    "model": "m",
                    "fact": "refuses_tools",
                    "value": True,
                    "ttl_ms": 60_000,
                    "reason": "500: tools param requires --jinja flag",
                }
            )
        )
        [fact] = cache.details()
        assert fact["reason"].endswith("500: tools param requires --jinja flag")
        forget = {"replica": "other", "backend": BACKEND, "model": "m", "fact": "refuses_tools"}
        shared.receive(orjson.dumps({**forget, "forget": True}))
        assert cache.details() == []
        assert shared.pending == 0, "a forget from elsewhere is not said again"

    run(redis_server, 60, scenario)
