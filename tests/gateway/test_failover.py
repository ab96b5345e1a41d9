"""Several backends for a model: the retry rules, exactly (docs/backends.md).

Real simulators on 127.0.0.1 as the replicas, the gateway in front, the
openai SDK as the client. A failure before anything reached the client is
tried once more on another backend; never twice, never after a stream
opened, never for the client's own mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.support import GatewayServer
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig


def _completions(sim: Simulator) -> int:
    return sum(1 for r in sim.requests if r.path.endswith("/chat/completions"))


@contextmanager
def replicas(
    *switches: dict[str, Any], **settings: Any
) -> Iterator[tuple[list[Simulator], GatewayServer]]:
    """One simulator per switches, all serving every model behind one gateway
    (``serve --backend`` repeated), in that order."""
    with ExitStack() as stack:
        sims = [stack.enter_context(Simulator(SimulatorConfig.load(None, **s))) for s in switches]
        urls = [sim.openai_url for sim in sims]
        settings = {"backend_kind": "openai", "health_interval": 0, **settings}
        gw = stack.enter_context(
            GatewayServer(Settings(backend=urls[0], backend_replicas=urls[1:], **settings))
        )
        yield sims, gw


def _backends(gw: GatewayServer) -> dict[str, dict[str, Any]]:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return {b["name"]: b for b in health["backends"]}


def test_a_failed_request_is_answered_by_the_other_backend_and_the_failed_one_goes_out() -> None:
    with replicas({"status": 500}, {}) as ((broken, good), gw):
        client = gw.client()
        for stream in (False, True, False):
            if stream:
                chunks = list(
                    client.chat.completions.create(
                        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL],
                        stream=True,
                    )
                )  # fmt: skip
                assert any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
            else:
                reply = client.chat.completions.create(
                    model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
                )
                assert reply.choices[0].message.tool_calls
        # Only the first request went to it (twice: a 500 to a request with tools may
        # be about the tools, so the round asks once on the rescue path), then it was out.
        assert _completions(broken) == 2
        assert _completions(good) == 3
        states = _backends(gw)
        assert states["default"]["state"] == "out"
        assert states["default"]["failures"] == 1
        assert states["default"]["url"] == broken.openai_url
        assert states["default-2"]["state"] == "in"
        metrics = httpx.get(gw.url + "/metrics", timeout=10).text
        assert 'toolrelay_failovers_total{reason="500"} 1.0' in metrics
        shown = broken.openai_url
        assert f'toolrelay_backend_up{{backend="default",url="{shown}"}} 0.0' in metrics
        assert 'toolrelay_backend_requests_total{backend="default-2"} 3.0' in metrics
        assert 'toolrelay_backend_error_rate{backend="default"} 1.0' in metrics


def test_never_twice() -> None:
    with replicas({"status": 500}, {"status": 503}, {}) as (sims, gw):
        with pytest.raises(openai.APIStatusError) as raised:
            gw.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert raised.value.status_code == 502
        assert [_completions(s) for s in sims] == [1, 1, 0]


def test_never_the_clients_own_mistake() -> None:
    with replicas({"status": 400}, {}) as (sims, gw):
        with pytest.raises(openai.BadRequestError):
            gw.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert [_completions(s) for s in sims] == [1, 0]
        assert _backends(gw)["default"]["state"] == "in"


def test_never_after_a_stream_opened() -> None:
    # The first replica drops the connection after three chunks: the client has
    # its 200 and the first words, so the failure reaches it, and nothing is retried.
    with replicas({"fail_after_chunks": 3, "chunk": 2}, {}) as (sims, gw):
        stream = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=[{"role": "user", "content": "hello there"}],
            stream=True,
        )  # fmt: skip
        got = []
        with pytest.raises(openai.APIError):
            for chunk in stream:
                got.append(chunk)
        assert got
        assert [_completions(s) for s in sims] == [1, 0]
        assert _backends(gw)["default"]["state"] == "out"


def test_a_stream_refused_before_it_opened_is_retried() -> None:
    with replicas({"status": 502}, {}) as (sims, gw):
        stream = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], stream=True
        )
        chunks = list(stream)
        assert any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
        assert [_completions(s) for s in sims] == [1, 1]


def test_requests_spread_over_the_replicas_by_weight(tmp_path: Any) -> None:
    with ExitStack() as stack:
        sims = [stack.enter_context(Simulator()) for _ in range(2)]
        config = tmp_path / "backends.yaml"
        config.write_text(
            "backends:\n"
            f"  - {{name: big, url: '{sims[0].openai_url}', kind: openai, weight: 3}}\n"
            f"  - {{name: small, url: '{sims[1].openai_url}', kind: openai}}\n"
        )
        gw = stack.enter_context(GatewayServer(Settings(config=str(config), health_interval=0)))
        client = gw.client()
        for _ in range(8):
            client.chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
        assert [_completions(s) for s in sims] == [6, 2]
        states = _backends(gw)
        assert (states["big"]["requests"], states["small"]["requests"]) == (6, 2)
        assert states["big"]["outstanding"] == states["small"]["outstanding"] == 0


def test_a_conversation_sticks_to_one_replica() -> None:
    with replicas({}, {}, {}, sticky="conversation") as (sims, gw):
        client = gw.client()
        first = [{"role": "system", "content": "be brief"}, *ASK_WEATHER]
        for turn in range(4):
            messages = [*first, *([{"role": "assistant", "content": "ok"}] * turn)]
            client.chat.completions.create(model="toolrelay-sim", messages=messages)
        assert sorted(_completions(s) for s in sims) == [0, 0, 4]


def test_a_header_sticks_a_session_to_one_replica() -> None:
    with replicas({}, {}, {}, sticky="header") as (sims, gw):
        client = gw.client()
        for n in range(6):
            client.chat.completions.create(
                model="toolrelay-sim", messages=[{"role": "user", "content": f"hi {n}"}],
                extra_headers={"x-toolrelay-session": "session-7"},
            )  # fmt: skip
        assert sorted(_completions(s) for s in sims) == [0, 0, 6]


def test_the_model_list_names_a_model_the_replicas_share_once() -> None:
    with replicas({}, {}, {}) as (_, gw):
        listed = [m.id for m in gw.client().models.list()]
        assert listed.count("toolrelay-sim") == 1


def test_each_backend_of_a_model_brings_its_own_format_unless_the_model_names_one(
    tmp_path: Any,
) -> None:
    from toolrelay.io.backends import Backends
    from toolrelay.io.round import build_round

    config = tmp_path / "backends.yaml"
    config.write_text(
        "backends:\n"
        "  - {name: a, url: 'http://127.0.0.1:9/v1', format: qwen3_coder, models: [m, own]}\n"
        "  - {name: b, url: 'http://127.0.0.1:9/v1', format: hermes, profile: vendor, "
        "models: [m, own]}\n"
        "models:\n"
        "  own: {format: glm45}\n"
    )
    settings = Settings(config=str(config))
    backends = Backends(settings)
    pool = backends.pool_for("m")
    a, b = pool.backends
    req = build_round(settings, {"model": "m", "messages": ASK_WEATHER})
    assert (pool.round_for(req, a).format, pool.round_for(req, a).profile) == ("qwen3_coder", None)
    assert (pool.round_for(req, b).format, pool.round_for(req, b).profile) == ("hermes", "vendor")
    # A profile the request chose stays; a format the model's entry names stays.
    chosen = build_round(settings, {"model": "m", "messages": ASK_WEATHER}, profile="graded")
    assert pool.round_for(chosen, b).profile == "graded"
    own = backends.pool_for("own")
    req = build_round(settings, {"model": "own", "messages": ASK_WEATHER})
    assert {own.round_for(req, backend).format for backend in own.backends} == {"glm45"}
