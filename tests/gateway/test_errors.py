"""Error shapes, backend failures, /health, /metrics, /docs and request ids."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.support import GatewayServer, gateway, silent_backend, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.server.background import BackgroundServer

COMPLETIONS = "/v1/chat/completions"


@pytest.fixture(scope="module")
def gw() -> Iterator[GatewayServer]:
    with stack(gateway_settings={"backend_kind": "openai"}) as (_, server):
        yield server


@pytest.fixture(scope="module")
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def down(closed_port: int) -> Iterator[GatewayServer]:
    """A gateway whose backend is not running."""
    with gateway(f"http://127.0.0.1:{closed_port}/v1") as server:
        yield server


def _post(gw: GatewayServer, body: Any, **kwargs: Any) -> httpx.Response:
    if isinstance(body, (bytes, str)):
        return httpx.post(gw.url + COMPLETIONS, content=body, timeout=20, **kwargs)
    return httpx.post(gw.url + COMPLETIONS, json=body, timeout=20, **kwargs)


def _error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert response.headers["x-request-id"]
    return dict(body["error"])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        ({"messages": ASK_WEATHER}, "model"),
        ({"model": 7, "messages": ASK_WEATHER}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": [1]}, "messages[0]"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "messages": ASK_WEATHER, "tools": {}}, "tools"),
        ({"model": "m", "messages": ASK_WEATHER, "tools": [{"type": "x"}]}, "tools[0].type"),
        (
            {
                "model": "m",
                "messages": ASK_WEATHER,
                "tools": [{"type": "function", "function": {}}],
            },
            "tools[0].function.name",
        ),
        ({"model": "m", "messages": ASK_WEATHER, "tool_choice": "sometimes"}, "tool_choice"),
        ({"model": "m", "messages": ASK_WEATHER, "stream": "yes"}, "stream"),
        ({"model": "m", "messages": ASK_WEATHER, "temperature": "hot"}, "temperature"),
        ({"model": "m", "messages": ASK_WEATHER, "max_tokens": 1.5}, "max_tokens"),
        ({"model": "m", "messages": ASK_WEATHER, "n": 2}, "n"),
        ({"model": "m", "messages": ASK_WEATHER, "toolrelay_profile": "x"}, "toolrelay_profile"),
        (
            {"model": "m", "messages": ASK_WEATHER, "stream_options": {"include_usage": 1}},
            "stream_options.include_usage",
        ),
    ],
)
def test_bad_requests_name_the_field(gw: GatewayServer, body: Any, param: str | None) -> None:
    response = _post(gw, body)
    assert response.status_code == 400
    error = _error(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_sdk_sees_bad_request(gw: GatewayServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(
            model="toolrelay-sim",
            messages=ASK_WEATHER,
            temperature="hot",  # type: ignore[arg-type]
        )
    assert caught.value.param == "temperature"
    assert caught.value.request_id


def test_backend_unreachable_is_502(down: GatewayServer) -> None:
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as caught:
            result = down.client().chat.completions.create(
                model="m", messages=ASK_WEATHER, stream=stream
            )
            list(result)  # type: ignore[call-overload]
        assert caught.value.status_code == 502
        assert "unreachable" in caught.value.message


def test_health_answers_with_backend_down(down: GatewayServer) -> None:
    response = httpx.get(down.url + "/health", timeout=10)
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "degraded"
    (backend,) = health["backends"]
    assert backend["reachable"] is False and "unreachable" in backend["error"]
    assert health["settings"]["port"] == 8787 and "api_key" not in health["settings"]
    assert "requests" in health["counters"]


def test_health_when_up(gw: GatewayServer) -> None:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    assert health["status"] == "ok" and health["backends"][0]["reachable"] is True
    assert health["settings"]["backends"][0]["kind"] == "openai"


def test_backend_5xx_is_502_with_its_message() -> None:
    with stack(status=503) as (_, gw), pytest.raises(openai.APIStatusError) as caught:
        gw.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
    assert caught.value.status_code == 502
    assert "simulated failure" in caught.value.message


def test_backend_timeout_is_504() -> None:
    # A server that accepts connections and never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        with gateway(url, backend_kind="openai", timeout=0.3) as gw:
            response = _post(gw, {"model": "m", "messages": ASK_WEATHER})
    assert response.status_code == 504
    assert _error(response)["code"] == "backend_timeout"


def test_failure_mid_stream_is_an_sse_error() -> None:
    with stack(fail_after_chunks=3, chunk=1) as (_, gw):
        stream = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        with pytest.raises(openai.APIError) as caught:
            list(stream)
        assert "broke" in caught.value.message or "backend" in caught.value.message
        with httpx.stream(
            "POST",
            gw.url + COMPLETIONS,
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "stream": True},
            timeout=20,
        ) as response:
            lines = [line for line in response.iter_lines() if line]
        assert lines[-1].startswith('data: {"error":')
        assert "data: [DONE]" not in lines


def test_keepalive_comments_while_backend_is_silent() -> None:
    with stack(
        delay_ms=400,
        chunk=40,
        gateway_settings={"keepalive_interval": 0.1, "backend_kind": "openai"},
    ) as (_, gw):
        with httpx.stream(
            "POST",
            gw.url + COMPLETIONS,
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "stream": True},
            timeout=20,
        ) as response:
            lines = list(response.iter_lines())
        assert ": keep-alive" in lines
        assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]"
        # The SDK ignores the comments.
        text = "".join(
            c.choices[0].delta.content or ""
            for c in gw.client().chat.completions.create(
                model="toolrelay-sim", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
        assert text.startswith("This is the toolrelay simulator")


def test_request_ids(gw: GatewayServer) -> None:
    ok = httpx.get(gw.url + "/health", timeout=10)
    assert ok.headers["x-request-id"].startswith("req_")
    echoed = httpx.get(gw.url + "/health", headers={"x-request-id": "abc-123"}, timeout=10)
    assert echoed.headers["x-request-id"] == "abc-123"
    completion = gw.client().chat.completions.with_raw_response.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
    )
    assert completion.headers["x-request-id"]


def test_unknown_route_and_method(gw: GatewayServer) -> None:
    missing = httpx.get(gw.url + "/v1/nope", timeout=10)
    assert missing.status_code == 404 and _error(missing)["type"] == "invalid_request_error"
    wrong = httpx.get(gw.url + COMPLETIONS, timeout=10)
    assert wrong.status_code == 405 and _error(wrong)


def test_metrics_and_docs(gw: GatewayServer) -> None:
    gw.client().chat.completions.create(model="toolrelay-sim", messages=ASK_WEATHER)
    metrics = httpx.get(gw.url + "/metrics", timeout=10)
    assert metrics.status_code == 200
    assert 'toolrelay_requests_total{outcome="ok"}' in metrics.text
    spec = httpx.get(gw.url + "/openapi.json", timeout=10).json()
    assert "/v1/chat/completions" in spec["paths"]
    docs = httpx.get(gw.url + "/docs", timeout=10)
    assert docs.status_code == 200 and "openapi.json" in docs.text


def test_docs_page_loads_every_asset_from_the_gateway(gw: GatewayServer) -> None:
    """Offline, a CDN link would leave /docs a bare link: every asset is local."""
    page = httpx.get(gw.url + "/docs", timeout=10).text
    assets = re.findall(r'(?:href|src)="([^"]+)"', page)
    assert assets and all(asset.startswith("/") for asset in assets), assets
    for asset in assets:
        if asset.startswith("/docs/assets/"):
            fetched = httpx.get(gw.url + asset, timeout=10)
            assert fetched.status_code == 200 and len(fetched.content) > 10_000, asset


def test_client_leaving_mid_stream_stops_the_relay() -> None:
    with stack(delay_ms=50, chunk=1, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        body = {"model": "toolrelay-sim", "messages": ASK_WEATHER, "stream": True}
        with httpx.stream("POST", gw.url + COMPLETIONS, json=body, timeout=20) as response:
            for line in response.iter_lines():
                if line.startswith('data: {"id"') and '"content":"' in line:
                    break  # leave after the first piece of text
        deadline = time.monotonic() + 10
        while True:
            counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
            if counters["requests"].get("client_gone"):
                break
            assert time.monotonic() < deadline, counters
            time.sleep(0.05)


def test_client_leaving_while_the_backend_is_silent_closes_the_backend_connection() -> None:
    closed = threading.Event()
    with (
        BackgroundServer(silent_backend(closed)) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", keepalive_interval=0) as gw,
    ):
        body = {"model": "m", "messages": ASK_WEATHER, "stream": True}
        with httpx.stream("POST", gw.url + COMPLETIONS, json=body, timeout=20) as response:
            for line in response.iter_lines():
                if '"content":"Hi"' in line:
                    break
        # Waiting for the backend's next chunk must not keep its generation going.
        assert closed.wait(5), "the gateway kept the backend's stream open"
        counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
        assert counters["requests"].get("client_gone") == 1, counters
