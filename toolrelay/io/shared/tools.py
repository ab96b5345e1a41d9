"""The ``/api/tools`` override in Redis, the same on every replica.

``POST /api/tools`` through any replica runs one script that numbers the
override (a version), stores it and publishes it; each replica installs what
it receives when it is newer than what it has, so two posts through two
replicas at once end the same everywhere. Turns and ``GET /api/tools`` read
the local copy. No override in Redis means the tools file's definitions, as
after a restart of a single process.

A post the client is told failed (503) must never take effect later: a Redis
that is hung (stopped, its connections open) would otherwise run the queued
script when it resumes and publish definitions nobody accepted. So the script
carries a deadline on Redis's own clock (read with ``TIME`` just before) and
does nothing once it has passed; the deadline is well inside the time the
replica waits for the answer. What is left is a Redis that runs the script in
time and then stops before its answer is written: there, the answer's own
timeout reports a failure for a write that was made (no test can stop Redis
between the two; the window is the one event-loop turn that writes replies).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from toolrelay.io.tools.definition import ToolDefinition, parse_definitions
from toolrelay.io.tools.registry import ActiveTools, ToolsUnavailable
from toolrelay.io.urls import redact_url

log = logging.getLogger("toolrelay.shared")

KEY = "toolrelay:tools"
VERSION_KEY = "toolrelay:tools:version"
CHANNEL = "toolrelay:tools"

# How long after Redis's TIME the write may still be made, in milliseconds: well
# inside the replica's own wait for the answer (state._COMMAND_TIMEOUT, 5 s).
WRITE_WINDOW_MS = 2000

# Number, store and publish in one step, so that the versions follow the writes;
# nothing at all once the deadline (ARGV[3], Redis's clock in ms) has passed.
_REPLACE = """
local now = redis.call('TIME')
if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) > tonumber(ARGV[3]) then
  return 0
end
local version = redis.call('INCR', KEYS[2])
local value = version .. '\\n' .. ARGV[1]
redis.call('SET', KEYS[1], value)
redis.call('PUBLISH', ARGV[2], value)
return version
"""


class RedisToolStore:
    """A :class:`~toolrelay.io.tools.registry.ToolStore` shared through Redis."""

    def __init__(self, url: str, file_definitions: tuple[ToolDefinition, ...]) -> None:
        self._shown_url = redact_url(url)
        self._file = ActiveTools(file_definitions, "file" if file_definitions else "none")
        self.active = self._file
        self._version = 0
        self._client: Redis | None = None

    def connect(self, client: Redis) -> None:
        self._client = client

    async def replace(self, definitions: tuple[ToolDefinition, ...]) -> ActiveTools:
        payload = orjson.dumps([definition.to_dict() for definition in definitions])
        if self._client is None:
            raise ToolsUnavailable("the shared store is not connected yet")
        try:
            seconds, microseconds = await self._client.time()
            deadline = seconds * 1000 + microseconds // 1000 + WRITE_WINDOW_MS
            version = await self._client.eval(
                _REPLACE, 2, KEY, VERSION_KEY, payload, CHANNEL, deadline
            )
        except (RedisError, OSError) as exc:
            raise ToolsUnavailable(
                f"Redis at {self._shown_url} does not answer ({exc}); the definitions "
                "were not replaced on any replica"
            ) from None
        if not version:
            raise ToolsUnavailable(
                f"Redis at {self._shown_url} answered too late; the definitions were not "
                "replaced on any replica"
            )
        self._install(int(version), definitions)
        return self.active

    async def aclose(self) -> None:
        return None  # the client belongs to the shared state

    def receive(self, data: bytes) -> None:
        """Install an override another replica (or this one) published, if newer."""
        parsed = _decode(data)
        if parsed is not None and parsed[0] > self._version:
            self._install(*parsed)

    async def resync(self, client: Redis) -> None:
        """Take what Redis holds, whatever this replica had (Redis may have restarted)."""
        data = await client.get(KEY)
        if data is None:
            if self.active is not self._file:
                log.info("no /api/tools override in Redis: the tools file's definitions apply")
            self.active, self._version = self._file, 0
            return
        parsed = _decode(data)
        if parsed is not None:
            self._version = 0
            self._install(*parsed)

    def _install(self, version: int, definitions: tuple[ToolDefinition, ...]) -> None:
        if version >= self._version:
            self._version = version
            self.active = ActiveTools(definitions, "request")


def _decode(data: Any) -> tuple[int, tuple[ToolDefinition, ...]] | None:
    try:
        version, _, payload = bytes(data).partition(b"\n")
        return int(version), parse_definitions(orjson.loads(payload))
    except (ValueError, TypeError):
        # orjson's decode error is a ValueError; so are parse_definitions' complaints.
        log.warning("ignored a malformed /api/tools override in Redis: %.200r", data)
        return None
