"""State shared between gateway replicas through Redis (``TOOLRELAY_REDIS_URL``).

What one replica learns about a model (:mod:`.facts`) and the ``/api/tools``
override (:mod:`.tools`) are written to Redis at once and published; every
replica keeps its own copy, updated from the messages and read in full again
every ``redis_resync`` seconds (:mod:`.state`). Requests read only the local
copy, so Redis is never awaited on the hot path and an outage never fails a
request: each replica goes on with what it knows.
"""

from toolrelay.io.shared.state import SharedState, SharedStateError, check_redis

__all__ = ["SharedState", "SharedStateError", "check_redis"]
