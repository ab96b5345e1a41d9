"""Issue 23, item 4: a ``POST /api/tools`` the client was told failed never takes
effect, whether Redis is stopped, killed or hung (SIGSTOP: its connections stay
open and the replica's command waits in them), and ``/health`` says a Redis
that does not answer is not connected."""

from __future__ import annotations

from contextlib import ExitStack

import httpx
import pytest

from tests.shared.redis_server import RedisServer
from tests.shared.test_replicas import eventually, lookup_tool, replicas, tools
from toolrelay.io.shared.tools import KEY, VERSION_KEY
from toolrelay.simulator import Simulator


def names(listed: dict[str, object]) -> list[str]:
    return [tool["name"] for tool in listed["tools"]]  # type: ignore[attr-defined,index]


def connected(url: str) -> bool:
    health = httpx.get(url + "/health", timeout=30).json()
    return bool(health["shared_state"]["connected"])


@pytest.mark.parametrize("outage", ["hung", "writes held", "killed", "stopped"])
def test_a_refused_post_never_takes_effect(redis_server: RedisServer, outage: str) -> None:
    with Simulator() as sim, ExitStack() as stack:
        first, second = replicas(stack, sim, redis_server, redis_resync=0.5)
        posted = httpx.post(first.url + "/api/tools", json=[lookup_tool("kept")], timeout=30)
        assert posted.status_code == 200
        eventually(lambda: names(tools(second)) == ["kept"])
        with redis_server.client() as direct:
            if outage == "hung":
                redis_server.pause()
            elif outage == "writes held":
                # TIME answers, the script waits: the hang between the two steps.
                direct.execute_command("CLIENT", "PAUSE", 8000, "WRITE")
            elif outage == "killed":
                redis_server.kill()
            else:
                redis_server.stop()
            if outage == "hung":
                # Connections open, nothing answers: /health does not pretend otherwise.
                assert not connected(first.url)
            refused = httpx.post(first.url + "/api/tools", json=[lookup_tool("refused")],
                                 timeout=60)  # fmt: skip
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "tools_store_unavailable"
            if outage == "hung":
                redis_server.resume()
            elif outage in ("killed", "stopped"):
                redis_server.start()
            eventually(lambda: connected(first.url) and connected(second.url), 60)
            if outage in ("hung", "writes held"):
                # Whatever waited in the connections has run by now: it changed nothing.
                direct.execute_command("CLIENT", "UNPAUSE")
                assert direct.get(VERSION_KEY) == b"1"
                assert b'"kept"' in direct.get(KEY) and b"refused" not in direct.get(KEY)
        # A later post is the next version, and both replicas read the same, never "refused".
        again = httpx.post(first.url + "/api/tools", json=[lookup_tool("later")], timeout=30)
        assert again.status_code == 200
        eventually(lambda: names(tools(first)) == names(tools(second)) == ["later"], 30)
