"""The connection to Redis: startup check, the listener, the writer, outages.

At startup Redis must answer (:class:`SharedStateError` otherwise: a replica
that silently kept its state to itself would disagree with the others). Then
two tasks run until shutdown: the listener takes the published changes and
reads everything again every ``resync`` seconds and after each reconnection;
the writer sends the facts this replica learns. When Redis goes away, one
warning is logged and the replica serves from its local copy; facts learned
meanwhile are written once Redis is back, and ``POST /api/tools`` answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from toolrelay.errors import ToolrelayError
from toolrelay.io.shared import facts, health, quality, tools
from toolrelay.io.shared.facts import SharedFacts
from toolrelay.io.shared.health import SharedHealth
from toolrelay.io.shared.quality import SharedQuality
from toolrelay.io.shared.responses import RedisResponseStore
from toolrelay.io.shared.tools import RedisToolStore
from toolrelay.io.tools.definition import ToolDefinition
from toolrelay.io.urls import redact_url

log = logging.getLogger("toolrelay.shared")

# A Redis command that takes longer than this has failed.
_COMMAND_TIMEOUT = 5.0
# /health's ping: a Redis that does not answer within this is not connected.
HEALTH_TIMEOUT = 2.0
# Pause between attempts while Redis is away.
_RETRY_DELAY = 0.5
_FACTS_CHANNEL = facts.CHANNEL.encode()
_TOOLS_CHANNEL = tools.CHANNEL.encode()
_HEALTH_CHANNEL = health.CHANNEL.encode()
_QUALITY_CHANNEL = quality.CHANNEL.encode()


class SharedStateError(ToolrelayError, RuntimeError):
    """Redis cannot be used at startup."""

    status = 503


def open_client(url: str) -> Redis:
    # One quick retry: a pooled connection Redis dropped (a restart) is reopened
    # at once; beyond that the caller decides, nobody waits on a backoff.
    return Redis.from_url(
        url,
        socket_timeout=_COMMAND_TIMEOUT,
        socket_connect_timeout=_COMMAND_TIMEOUT,
        retry=Retry(NoBackoff(), 1),
    )


def _unusable(url: str, error: BaseException) -> str:
    return (
        f"Redis at {redact_url(url)} (TOOLRELAY_REDIS_URL) cannot be used: {error}. Start it, "
        "fix the URL, or unset TOOLRELAY_REDIS_URL to keep the state in each process"
    )


async def check_redis(url: str) -> None:
    """Raise :class:`SharedStateError` unless Redis at ``url`` answers."""
    client = open_client(url)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise SharedStateError(_unusable(url, exc)) from None
    finally:
        await client.aclose()


class SharedState:
    def __init__(self, url: str, resync: float = 10.0) -> None:
        self.shown_url = redact_url(url)
        self.resync_interval = resync
        self.replica = uuid.uuid4().hex
        self.facts = SharedFacts(self.replica)
        self.backend_health = SharedHealth(self.replica)
        self.quality = SharedQuality(self.replica)
        self._url = url
        self._tools: RedisToolStore | None = None
        self._responses: RedisResponseStore | None = None
        self._client: Redis | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.connected = False

    def tool_store(self, file_definitions: tuple[ToolDefinition, ...]) -> RedisToolStore:
        self._tools = RedisToolStore(self._url, file_definitions)
        return self._tools

    def response_store(self, capacity: int, ttl: float) -> RedisResponseStore:
        self._responses = RedisResponseStore(capacity, ttl)
        return self._responses

    async def start(self) -> None:
        """Connect and read the shared state; :class:`SharedStateError` if Redis fails."""
        client = open_client(self._url)
        try:
            await client.ping()
            await self._resync(client)
        except (RedisError, OSError) as exc:
            await client.aclose()
            raise SharedStateError(_unusable(self._url, exc)) from None
        self._client = client
        if self._tools is not None:
            self._tools.connect(client)
        if self._responses is not None:
            self._responses.connect(client)
        self.connected = True
        self._tasks = [
            asyncio.create_task(self._listen(client), name="toolrelay-shared-listener"),
            asyncio.create_task(self._write(client, self.facts), name="toolrelay-shared-writer"),
            asyncio.create_task(
                self._write(client, self.backend_health), name="toolrelay-health-writer"
            ),
            asyncio.create_task(self._write(client, self.quality), name="toolrelay-quality-writer"),
        ]
        log.info(
            "shared state: facts, backends' health, stored responses and the /api/tools "
            "override in Redis at %s",
            self.shown_url,
        )

    async def health(self) -> dict[str, Any]:
        """What ``/health`` shows; ``connected`` only when Redis answers a ping now,
        within :data:`HEALTH_TIMEOUT` (a hung Redis keeps its connections open)."""
        return {
            "store": "redis",
            "url": self.shown_url,
            "connected": self.connected and await self._answers(),
            "unsent_facts": self.facts.pending,
            "unsent_health": self.backend_health.pending + self.quality.pending,
        }

    async def _answers(self) -> bool:
        if self._client is None:
            return False
        try:
            await asyncio.wait_for(self._client.ping(), HEALTH_TIMEOUT)
        except (RedisError, OSError, asyncio.TimeoutError):
            return False
        return True

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._responses is not None:
            await self._responses.aclose()
        if self._client is not None:
            # What was learned last still goes to the other replicas, if Redis takes it.
            with contextlib.suppress(RedisError, OSError, asyncio.TimeoutError):
                await asyncio.wait_for(self.facts.flush(self._client), _COMMAND_TIMEOUT)
            await self._client.aclose()
            self._client = None

    async def _resync(self, client: Redis) -> None:
        await self.facts.resync(client)
        await self.backend_health.resync(client)
        await self.quality.resync(client)
        if self._tools is not None:
            await self._tools.resync(client)

    async def _listen(self, client: Redis) -> None:
        while True:
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(
                    facts.CHANNEL, tools.CHANNEL, health.CHANNEL, quality.CHANNEL
                )
                # Whatever was published while this replica was not listening.
                await self._resync(client)
                self._reachable(True)
                due = time.monotonic() + self.resync_interval
                while True:
                    wait = max(0.0, due - time.monotonic())
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
                    if message is not None and message["type"] == "message":
                        self._dispatch(message["channel"], message["data"])
                    if time.monotonic() >= due:
                        await self._resync(client)
                        due = time.monotonic() + self.resync_interval
            except (RedisError, OSError) as exc:
                self._reachable(False, exc)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
            await asyncio.sleep(_RETRY_DELAY)

    def _dispatch(self, channel: bytes, data: bytes) -> None:
        if channel == _FACTS_CHANNEL:
            self.facts.receive(data)
        elif channel == _HEALTH_CHANNEL:
            self.backend_health.receive(data)
        elif channel == _QUALITY_CHANNEL:
            self.quality.receive(data)
        elif channel == _TOOLS_CHANNEL and self._tools is not None:
            self._tools.receive(data)

    async def _write(
        self, client: Redis, writes: SharedFacts | SharedHealth | SharedQuality
    ) -> None:
        while True:
            await writes.queued()
            try:
                await writes.flush(client)
            except (RedisError, OSError) as exc:
                self._reachable(False, exc)
                await asyncio.sleep(_RETRY_DELAY)
                writes.requeue()
            else:
                self._reachable(True)

    def _reachable(self, up: bool, error: BaseException | None = None) -> None:
        """Log the changes between reachable and not, once each."""
        if up and not self.connected:
            log.info("Redis at %s answers again: shared state read again", self.shown_url)
            self.facts.requeue()
            self.backend_health.requeue()
            self.quality.requeue()
        elif not up and self.connected:
            log.warning(
                "Redis at %s does not answer (%s): this replica goes on with what it knows; "
                "facts it learns are written when Redis is back, POST /api/tools answers 503",
                self.shown_url,
                error,
            )
        self.connected = up
