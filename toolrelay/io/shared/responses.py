"""The Responses store in Redis: a conversation goes on on whichever replica.

Each kept response is one key (``toolrelay:response:<id>``: the conversation
before it and its body, a JSON object) that expires after ``ttl`` seconds; a sorted set of the
ids by time keeps the count at ``capacity``, the oldest deleted first. A
request that continues a response fetches it first (:meth:`prefetch`), so the
front's reading stays pure; a finished response is written in the background
(:meth:`put` returns at once), before its bytes reach the client, and a write
Redis refuses is logged and lost (the conversation can still be sent whole).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger("toolrelay.shared")

PREFIX = "toolrelay:response:"
INDEX = "toolrelay:responses"
# Fetched entries waiting for their request's reading; more means requests
# failed before they read theirs, and the oldest are dropped.
_FETCHED_MAX = 1000

# A kept response as read: the conversation before it, what of its output is not
# in that conversation yet, and the response.
_Entry = tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]


class RedisResponseStore:
    def __init__(self, capacity: int, ttl: float) -> None:
        self.capacity = capacity
        self.ttl_ms = int(ttl * 1000)
        self._client: Redis | None = None
        self._fetched: dict[str, _Entry] = {}
        self._writes: set[asyncio.Task[None]] = set()

    def connect(self, client: Redis) -> None:
        self._client = client

    async def _load(self, response_id: str) -> _Entry | None:
        if self._client is None:
            return None
        try:
            raw = await self._client.get(PREFIX + response_id)
        except (RedisError, OSError) as exc:
            log.warning("Redis did not give response %s: %s", response_id, exc)
            return None
        if raw is None:
            return None
        kept = orjson.loads(raw)
        if isinstance(kept, list):
            # Written before the conversation was made when asked for: the
            # response's output is in it already.
            conversation, response = kept
            return conversation, [], response
        response = kept["response"]
        return kept["history"], response["output"], response

    async def prefetch(self, response_id: str) -> None:
        entry = await self._load(response_id)
        if entry is not None:
            if len(self._fetched) >= _FETCHED_MAX:
                self._fetched.pop(next(iter(self._fetched)))
            self._fetched[response_id] = entry

    def get(self, response_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        entry = self._fetched.pop(response_id, None)
        return None if entry is None else (entry[0], entry[1])

    def put(self, response: dict[str, Any], history: list[dict[str, Any]]) -> None:
        if self.capacity <= 0 or self._client is None:
            return
        data = orjson.dumps({"history": history, "response": response})
        task = asyncio.get_running_loop().create_task(
            self._write(self._client, response["id"], data)
        )
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, client: Redis, response_id: str, data: bytes) -> None:
        now_ms = time.time() * 1000
        try:
            pipe = client.pipeline(transaction=False)
            pipe.set(PREFIX + response_id, data, px=self.ttl_ms)
            pipe.zadd(INDEX, {response_id: now_ms})
            # Ids expire with their keys: drop those older than the TTL, then the excess.
            pipe.zremrangebyscore(INDEX, "-inf", now_ms - self.ttl_ms)
            pipe.zcard(INDEX)
            *_, count = await pipe.execute()
            excess = int(count) - self.capacity
            if excess > 0:
                # Without decode_responses, the members come back as bytes.
                oldest = cast(list[tuple[bytes, float]], await client.zpopmin(INDEX, excess))
                if oldest:
                    await client.delete(*(PREFIX + member.decode() for member, _ in oldest))
        except (RedisError, OSError) as exc:
            log.warning("Redis did not keep response %s: %s", response_id, exc)

    async def fetch_response(self, response_id: str) -> dict[str, Any] | None:
        entry = await self._load(response_id)
        return None if entry is None else entry[2]

    async def remove(self, response_id: str) -> bool:
        if self._client is None:
            return False
        pipe = self._client.pipeline(transaction=False)
        pipe.delete(PREFIX + response_id)
        pipe.zrem(INDEX, response_id)
        deleted, _ = await pipe.execute()
        return bool(deleted)

    async def aclose(self) -> None:
        """Let the writes under way finish (bounded by the client's timeouts)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
