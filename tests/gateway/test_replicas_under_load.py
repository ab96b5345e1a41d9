"""Three ``toolrelay simulate`` processes behind one gateway under a bounded
load from the openai SDK: one slowed, one killed mid-stream. Nothing is lost:
every request that had not started streaming is answered, and the killed
replica is out within the documented time (docs/backends.md)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.gateway.replica_processes import Outcome, ask, simulate_processes
from tests.gateway.support import GatewayServer
from toolrelay.io.settings import Settings

REQUESTS = 90
CONCURRENCY = 6
KILL_AFTER = 30
HEALTH_INTERVAL = 0.5
# docs/backends.md: a dead replica is out at its first failed request, or at the
# next active check at the latest (interval + the check's 2 s timeout).
OUT_WITHIN = HEALTH_INTERVAL + 2.0


def _states(gw: GatewayServer) -> dict[str, dict[str, object]]:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return {b["name"]: b for b in health["backends"]}


def test_a_killed_replica_loses_no_request_that_had_not_started_streaming() -> None:
    with simulate_processes(
        ("--delay-ms", "2"),  # fast
        ("--delay-ms", "40"),  # slowed
        ("--delay-ms", "10"),  # killed mid-stream
    ) as (fast, slow, victim):
        settings = Settings(
            backend=fast.url,
            backend_replicas=[slow.url, victim.url],
            backend_kind="openai",
            health_interval=HEALTH_INTERVAL,
        )
        with GatewayServer(settings) as gw:
            client = gw.client()
            done = 0
            lock = threading.Lock()
            killed = threading.Event()
            killed_at: list[float] = []

            def one(n: int) -> Outcome:
                nonlocal done
                outcome = ask(client, n, stream=n % 2 == 0)
                with lock:
                    done += 1
                    if done == KILL_AFTER:
                        threading.Thread(target=kill_while_busy).start()
                return outcome

            def kill_while_busy() -> None:
                # Killed while a request is in flight on it (a bounded wait for one).
                deadline = time.monotonic() + 10
                while _states(gw)["default-3"]["outstanding"] == 0:
                    assert time.monotonic() < deadline
                victim.kill()
                killed_at.append(time.monotonic())
                killed.set()

            with ThreadPoolExecutor(CONCURRENCY) as pool:
                outcomes = list(pool.map(one, range(REQUESTS)))
            assert killed.wait(10)
            # Counted, every one: none lost, none failed before its first chunk.
            assert len(outcomes) == REQUESTS
            failed = [o for o in outcomes if not o.ok]
            assert all(o.stream and o.chunks > 0 for o in failed), failed
            assert len(failed) <= CONCURRENCY  # at most the streams in flight on it
            # The killed replica is out (its connection refused, or the check).
            deadline = killed_at[0] + OUT_WITHIN
            while _states(gw)["default-3"]["state"] != "out":
                assert time.monotonic() < deadline, _states(gw)
                time.sleep(0.1)
            states = _states(gw)
            assert states["default"]["state"] == states["default-2"]["state"] == "in"
            # The slowed replica holds its requests longer: it was given fewer.
            assert states["default-2"]["requests"] < states["default"]["requests"]
            metrics = httpx.get(gw.url + "/metrics", timeout=10).text
            assert 'toolrelay_backend_up{backend="default-3"' in metrics
            # What was in flight on it when it died was retried (not started) or
            # broke in the client's stream (started): one or the other, at least once.
            counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
            handled = sum(counters["failovers"].values()) + sum(counters["broken_streams"].values())
            assert handled >= 1
            assert len(failed) <= counters["broken_streams"].get("reset", 0)
