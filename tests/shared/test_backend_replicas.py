"""Two gateways, several model servers and one real Redis: a backend one
gateway takes out is out on the other, and a Responses conversation goes on
on whichever gateway the next request reaches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import openai
import pytest
import redis

from tests.gateway.replica_processes import simulate_processes
from tests.gateway.support import GatewayServer
from tests.gateway.test_quality_routing import INVALID_CALLS
from tests.shared.redis_server import RedisServer
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.io.settings import Settings
from toolrelay.routing_quality import MIN_ROUNDS
from toolrelay.simulator import Simulator, SimulatorConfig


def _completions(sim: Simulator) -> int:
    return sum(1 for r in sim.requests if r.path.endswith("/chat/completions"))


def _state(gw: GatewayServer, name: str) -> str:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return str(next(b["state"] for b in health["backends"] if b["name"] == name))


@contextmanager
def two_gateways(
    redis: RedisServer, sims: list[Simulator], **settings: Any
) -> Iterator[tuple[GatewayServer, GatewayServer]]:
    urls = [sim.openai_url for sim in sims]
    with ExitStack() as stack:
        config: dict[str, Any] = {
            "backend": urls[0],
            "backend_replicas": urls[1:],
            "backend_kind": "openai",
        }
        gateways = [
            stack.enter_context(GatewayServer(Settings(**config, redis_url=redis.url, **settings)))
            for _ in range(2)
        ]
        yield gateways[0], gateways[1]


def _eventually(check: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the bounded wait"
        time.sleep(0.05)


def test_a_backend_one_gateway_takes_out_is_out_on_the_other(redis_server: RedisServer) -> None:
    with (
        Simulator(SimulatorConfig.load(None, status=500)) as broken,
        Simulator() as good,
        # No active checks: the second gateway can only know it through Redis.
        two_gateways(redis_server, [broken, good], health_interval=0) as (first, second),
    ):
        first.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert _state(first, "default") == "out"
        _eventually(lambda: _state(second, "default") == "out")
        before = _completions(broken)
        for _ in range(4):
            second.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert _completions(broken) == before
        assert _completions(good) == 5


def test_a_backend_back_in_service_is_back_on_the_other_too(redis_server: RedisServer) -> None:
    with (
        Simulator(SimulatorConfig.load(None, status=500)) as flaky,
        Simulator() as good,
        two_gateways(redis_server, [flaky, good], health_interval=0.2, backend_backoff=3.0) as (
            first,
            second,
        ),
    ):
        client = first.client()
        client.chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        _eventually(lambda: _state(second, "default") == "out")
        # Its model list answers all along: the active checks do not cut the back-off short.
        time.sleep(0.5)
        assert _state(first, "default") == "out"
        flaky.app.state.simulator.config = SimulatorConfig.load(None)  # it answers again
        before = _completions(flaky)

        def answered_by_it() -> bool:
            client.chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
            return _completions(flaky) > before

        # Once its back-off is over, the next request it gets brings it back, everywhere.
        _eventually(answered_by_it)
        assert _state(first, "default") == "in"
        _eventually(lambda: _state(second, "default") == "in")


def _client(gw: GatewayServer) -> openai.OpenAI:
    return gw.client()


def test_a_responses_conversation_goes_on_on_the_other_gateway(redis_server: RedisServer) -> None:
    with Simulator() as sim, two_gateways(redis_server, [sim]) as (first, second):
        one = _client(first).responses.create(
            model="toolrelay-sim", input="my name is Ada", store=True
        )
        two = _client(second).responses.create(
            model="toolrelay-sim", input="what is my name?", previous_response_id=one.id
        )
        assert "what is my name?" in two.output_text
        sent = sim.requests[-1].body["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == [
            "my name is Ada",
            "what is my name?",
        ]
        assert _client(second).responses.retrieve(one.id).id == one.id
        _client(second).responses.delete(one.id)
        with pytest.raises(openai.NotFoundError):
            _client(first).responses.retrieve(one.id)


def test_the_redis_store_is_bounded(redis_server: RedisServer) -> None:
    with (
        Simulator() as sim,
        two_gateways(redis_server, [sim], responses_store=2) as (first, second),
    ):
        ids = [
            _client(first).responses.create(model="toolrelay-sim", input=f"hi {n}").id
            for n in range(3)
        ]
        _eventually(lambda: _found(second, ids[2]))
        assert not _found(second, ids[0])  # the oldest went first
        assert _found(second, ids[1])


def test_the_redis_store_expires(redis_server: RedisServer) -> None:
    with Simulator() as sim, two_gateways(redis_server, [sim], responses_ttl=30.0) as (first, _):
        kept = _client(first).responses.create(model="toolrelay-sim", input="hi").id
        client = redis.Redis.from_url(redis_server.url)
        try:
            _eventually(lambda: client.exists(f"toolrelay:response:{kept}") == 1)
            assert 0 < client.pttl(f"toolrelay:response:{kept}") <= 30_000
        finally:
            client.close()


def _found(gw: GatewayServer, response_id: str) -> bool:
    answer = httpx.get(f"{gw.url}/v1/responses/{response_id}", timeout=10)
    assert answer.status_code in (200, 404)
    return answer.status_code == 200


def test_a_killed_model_server_is_out_on_every_gateway_within_the_documented_time(
    redis_server: RedisServer,
) -> None:
    # docs/backends.md: without traffic, within health_interval + 2 s on the
    # gateway that checks, and on the others at once through Redis (this second
    # gateway runs no checks and gets no request: Redis is all it has).
    interval = 0.5
    with simulate_processes((), ()) as (victim, survivor), ExitStack() as stack:
        config: dict[str, Any] = {
            "backend": victim.url, "backend_replicas": [survivor.url], "backend_kind": "openai",
            "redis_url": redis_server.url,
        }  # fmt: skip
        checking = stack.enter_context(GatewayServer(Settings(**config, health_interval=interval)))
        other = stack.enter_context(GatewayServer(Settings(**config, health_interval=0)))
        assert _state(checking, "default") == _state(other, "default") == "in"
        victim.kill()
        killed = time.monotonic()
        _eventually(lambda: _state(checking, "default") == "out", seconds=interval + 2.0 + 1.0)
        _eventually(lambda: _state(other, "default") == "out", seconds=1.0)
        assert time.monotonic() - killed < interval + 2.0 + 1.0
        reply = other.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert reply.choices[0].message.content


def test_a_quality_verdict_holds_on_every_gateway(redis_server: RedisServer) -> None:
    with (
        Simulator() as good,
        Simulator() as other,
        Simulator(SimulatorConfig.load(INVALID_CALLS)) as invalid,
        two_gateways(redis_server, [good, other, invalid], quality_routing=True) as (
            first,
            second,
        ),
    ):
        for _ in range(3 * MIN_ROUNDS + 3):
            first.client().chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
        factor = 'toolrelay_backend_quality_factor{backend="default-3",model="toolrelay-sim"} 0.1'

        def cut_on_second() -> bool:
            # The pool of a model exists once a request asked for it.
            second.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
            return factor in httpx.get(second.url + "/metrics", timeout=10).text

        _eventually(cut_on_second)
        before = _completions(invalid)
        for _ in range(20):
            second.client().chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
        # Its own window has nothing to judge by yet: the first gateway's verdict holds.
        assert _completions(invalid) - before <= 2 * 2  # a request and its correction, twice
