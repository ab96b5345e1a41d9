"""Two gateways sharing one real Redis: what one learns or is told, the other uses.

Each gateway is a real app on its own port with its own backends (and so its
own capability caches), as two replicas behind a load balancer are.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from tests.gateway.support import GatewayServer, gateway
from tests.shared.redis_server import RedisServer
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator, SimulatorConfig

ASK = {"model": "m", "messages": ASK_WEATHER}
WITH_TOOLS = {**ASK, "tools": [WEATHER_TOOL]}


def lookup_tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name}: looks something up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        "url": "http://127.0.0.1:9/lookup",
        "method": "GET",
    }


def chat(gw: GatewayServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)


def facts(gw: GatewayServer) -> dict[str, Any]:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return dict(health["backends"][0]["facts"])


def tools(gw: GatewayServer) -> dict[str, Any]:
    answer = httpx.get(gw.url + "/api/tools", timeout=10)
    assert answer.status_code == 200
    return dict(answer.json())


def sent_tools(sim: Simulator, since: int = 0) -> list[bool]:
    """For each chat request the model server got (from the ``since``-th), whether
    it carried native tools."""
    requests = list(sim.requests)[since:]
    return [bool(r.body.get("tools")) for r in requests if r.path.endswith("/chat/completions")]


def eventually(check: Any, seconds: float = 30.0) -> None:
    """Wait (bounded) until ``check()`` holds."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)


@pytest.fixture
def refusing_sim() -> Iterator[Simulator]:
    """A model server that refuses requests with tools (Ollama's 400)."""
    with Simulator(SimulatorConfig.load(None, no_tools_support=True)) as sim:
        yield sim


def replicas(
    stack: ExitStack, sim: Simulator, redis_server: RedisServer, **settings: Any
) -> tuple[GatewayServer, GatewayServer]:
    options = {"backend_kind": "openai", "redis_url": redis_server.url, **settings}
    first = stack.enter_context(gateway(sim.openai_url, **options))
    second = stack.enter_context(gateway(sim.openai_url, **options))
    return first, second


def test_a_refusal_learned_through_one_sends_the_other_straight_to_rescue(
    refusing_sim: Simulator, redis_server: RedisServer
) -> None:
    with ExitStack() as stack:
        first, second = replicas(stack, refusing_sim, redis_server)
        assert chat(first, WITH_TOOLS).status_code == 200
        # The first replica asked natively, was refused, and rescued.
        assert sent_tools(refusing_sim) == [True, False]
        # Written and published by the first replica's writer, beside the answer: soon.
        eventually(lambda: facts(second).get("m", {}).get("refuses_tools") is True)
        before = len(refusing_sim.requests)
        reply = chat(second, WITH_TOOLS)
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
            "get_weather"
        )
        # The second went straight to rescue: no request of its carried native tools.
        assert sent_tools(refusing_sim, before) == [False]


def test_facts_expire_on_every_replica_with_the_ttl(
    refusing_sim: Simulator, redis_server: RedisServer
) -> None:
    with ExitStack() as stack:
        # A TTL of seconds: on a loaded machine the steps before the check take a while.
        first, second = replicas(stack, refusing_sim, redis_server, capability_ttl=6.0)
        assert chat(first, WITH_TOOLS).status_code == 200
        learned = time.monotonic()  # the facts were set before this: they expire before +6 s
        eventually(lambda: "m" in facts(second))
        with redis_server.client() as client:
            keys = client.keys("toolrelay:fact:*")
            assert len(keys) == 2  # refuses_tools and native_tools: false
            assert all(0 < client.pttl(key) <= 6000 for key in keys)
        eventually(lambda: time.monotonic() - learned > 6.1)
        assert facts(first) == {} and facts(second) == {}
        with redis_server.client() as client:
            assert client.keys("toolrelay:fact:*") == []
        # Forgotten: the second asks natively again, and learns again.
        before = len(refusing_sim.requests)
        assert chat(second, WITH_TOOLS).status_code == 200
        assert sent_tools(refusing_sim, before) == [True, False]


def test_an_override_posted_through_one_is_what_the_other_uses_next(
    redis_server: RedisServer,
) -> None:
    with Simulator() as sim, ExitStack() as stack:
        first, second = replicas(stack, sim, redis_server)
        assert tools(second)["source"] == "none"
        posted = httpx.post(first.url + "/api/tools", json=[lookup_tool("lookup")], timeout=10)
        assert posted.status_code == 200
        # Published before the post answered; delivered by pub/sub within milliseconds
        # (waited for, bounded: a loaded machine may take longer to read it).
        eventually(lambda: tools(second) == posted.json())
        assert (tools(second)["source"], tools(second)["count"]) == ("request", 1)
        assert chat(second, ASK).status_code == 200
        offered = [tool["function"]["name"] for tool in sim.requests[-1].body["tools"]]
        assert offered == ["lookup"]


def test_posts_through_both_at_once_end_the_same_everywhere(redis_server: RedisServer) -> None:
    import concurrent.futures

    with Simulator() as sim, ExitStack() as stack:
        first, second = replicas(stack, sim, redis_server)
        jobs = [(gw, lookup_tool(f"tool_{n}")) for n in range(20) for gw in (first, second)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda job: httpx.post(job[0].url + "/api/tools", json=[job[1]], timeout=10),
                    jobs,
                )
            )
        assert {answer.status_code for answer in answers} == {200}
        with redis_server.client() as client:
            stored = client.get("toolrelay:tools")
        assert stored is not None
        last = stored.split(b"\n", 1)[1]
        eventually(lambda: tools(first)["tools"] == tools(second)["tools"])
        assert tools(first)["tools"][0]["name"].encode() in last


def test_redis_going_away_fails_no_request_and_what_was_learned_meanwhile_is_shared_after(
    refusing_sim: Simulator, redis_server: RedisServer
) -> None:
    with ExitStack() as stack:
        first, second = replicas(stack, refusing_sim, redis_server, redis_resync=0.5)
        redis_server.stop()
        # Requests go on from the local copy; learning works, locally.
        assert chat(first, WITH_TOOLS).status_code == 200
        assert facts(first)["m"]["refuses_tools"] is True
        assert tools(second)["source"] == "none"
        refused = httpx.post(first.url + "/api/tools", json=[lookup_tool("lookup")], timeout=20)
        assert refused.status_code == 503
        assert refused.json()["ok"] is False
        assert refused.json()["error"]["code"] == "tools_store_unavailable"
        assert refused.headers["retry-after"] == "1"
        health = httpx.get(first.url + "/health", timeout=10).json()
        assert health["shared_state"]["connected"] is False
        assert health["shared_state"]["unsent_facts"] == 2
        assert "m" not in facts(second)
        # Redis comes back (empty): the fact learned meanwhile reaches the other replica.
        redis_server.start()
        eventually(lambda: facts(second).get("m", {}).get("refuses_tools") is True)
        health = httpx.get(first.url + "/health", timeout=10).json()
        assert health["shared_state"] == {**health["shared_state"], "connected": True}
        assert health["shared_state"]["unsent_facts"] == 0
        posted = httpx.post(first.url + "/api/tools", json=[lookup_tool("lookup")], timeout=10)
        assert posted.status_code == 200
        assert tools(second) == posted.json()


def test_an_override_lost_with_redis_gives_way_to_the_file_everywhere(
    redis_server: RedisServer,
) -> None:
    with Simulator() as sim, ExitStack() as stack:
        first, second = replicas(stack, sim, redis_server, redis_resync=0.5)
        assert httpx.post(first.url + "/api/tools", json=[lookup_tool("a")], timeout=10).is_success
        assert tools(second)["source"] == "request"
        redis_server.stop()
        redis_server.start()  # no persistence: the override is gone, as at a restart
        eventually(lambda: tools(first)["source"] == tools(second)["source"] == "none")
