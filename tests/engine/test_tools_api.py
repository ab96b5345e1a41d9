"""``GET|POST /api/tools`` over real HTTP: every status, ``source``, the admin
token, the next-turn-only rule; the tools settings and the startup errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.support import weather_tool
from tests.gateway.support import GatewayServer, gateway
from tests.tools.service import Service
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig

EXAMPLE = Path(__file__).parents[2] / "tools.example.json"


def post(url: str, content: bytes | str, token: str | None = None, **headers: str):
    if token is not None:
        headers["authorization"] = token
    return httpx.post(url + "/api/tools", content=content, headers=headers, timeout=10)


def definitions(service_url: str, path: str = "/weather/{city}") -> list[dict[str, Any]]:
    return [{**weather_tool(service_url), "url": service_url + path}]


def test_get_reports_the_file_s_tools(sim: Simulator) -> None:
    with gateway(sim.openai_url, tools_file=str(EXAMPLE)) as gw:
        answer = httpx.get(gw.url + "/api/tools", timeout=10)
    assert answer.status_code == 200
    body = answer.json()
    assert (body["ok"], body["count"], body["source"]) == (True, 10, "file")
    # As written, but for the header values: secrets are shown as *** (issue 23).
    expected = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    for tool in expected:
        if "headers" in tool:
            tool["headers"] = {name: "***" for name in tool["headers"]}
    assert body["tools"] == expected


def test_no_file_is_source_none_and_a_post_is_source_request(
    sim: Simulator, service: Service
) -> None:
    with gateway(sim.openai_url) as gw:
        assert httpx.get(gw.url + "/api/tools").json() == {
            "ok": True,
            "count": 0,
            "source": "none",
            "tools": [],
        }
        sent = definitions(service.url)
        answer = post(gw.url, json.dumps(sent), **{"content-type": "application/json"})
        assert answer.status_code == 200
        expected = {"ok": True, "count": 1, "source": "request", "tools": sent}
        assert answer.json() == expected
        assert httpx.get(gw.url + "/api/tools").json() == expected


def test_the_master_switch_off_ignores_the_file(sim: Simulator) -> None:
    with gateway(sim.openai_url, tools_file=str(EXAMPLE), tools_enabled=False) as gw:
        assert httpx.get(gw.url + "/api/tools").json()["source"] == "none"


BAD_BODIES = [
    (b"", "the body is empty"),
    (b"  \n", "the body is empty"),
    (b"\xff\xfe[]", "not UTF-8 text (byte 0 is invalid)"),
    (b"[{", "not valid JSON"),
    (b'{"name": "a"}', "must be a JSON array of objects, not an object"),
    (b"[]", "the array holds no tool definition"),
    (b"[1]", "tool #0: must be a JSON object, not a number"),
    (
        b'[{"name": "ok", "url": "http://h/"}, {"name": "get_item", "url": "http://h/{id}"}]',
        "tool #1 ('get_item'), field 'url': placeholder {id} names no property",
    ),
]


@pytest.mark.parametrize(("content", "message"), BAD_BODIES)
def test_bad_bodies_are_400_and_change_nothing(
    sim: Simulator, content: bytes, message: str
) -> None:
    with gateway(sim.openai_url, tools_file=str(EXAMPLE)) as gw:
        answer = post(gw.url, content)
        assert answer.status_code == 400
        body = answer.json()
        assert body["ok"] is False
        assert body["error"]["type"] == "invalid_request_error"
        assert body["error"]["code"] == "invalid_tools"
        assert message in body["error"]["message"]
        assert httpx.get(gw.url + "/api/tools").json()["source"] == "file"


def test_a_body_over_the_limit_is_413(sim: Simulator) -> None:
    with gateway(sim.openai_url, max_body_bytes=100) as gw:
        answer = post(gw.url, "[" + " " * 200 + "]")
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "body_too_large"


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer wrong", 401),
        ("Bearer s3cr3", 401),
        ("Bearer s3cr3t-and-more", 401),
        ("Basic s3cr3t", 401),
        ("s3cr3t", 401),
        ("Bearer s3cr3t", 200),
        ("bearer  s3cr3t", 200),
    ],
)
def test_the_admin_token_guards_post(
    sim: Simulator, service: Service, authorization: str | None, status: int
) -> None:
    with gateway(sim.openai_url, admin_token="s3cr3t") as gw:
        answer = post(gw.url, json.dumps(definitions(service.url)), authorization)
        assert answer.status_code == status
        admin = {"authorization": "Bearer s3cr3t"}
        if status == 401:
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["error"]["type"] == "authentication_error"
            listed = httpx.get(gw.url + "/api/tools", headers=admin)
            assert listed.json()["source"] == "none"
        # Reading takes the token too (issue 23): the definitions name third parties.
        assert httpx.get(gw.url + "/api/tools", headers=admin).status_code == 200
        assert httpx.get(gw.url + "/api/tools").status_code == 401


def test_without_a_model_server_both_are_503() -> None:
    with gateway("", tools_file=str(EXAMPLE)) as gw:
        answers = [httpx.get(gw.url + "/api/tools"), post(gw.url, EXAMPLE.read_bytes())]
    for answer in answers:
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "llm_disabled"
        assert "no model server is configured" in answer.json()["error"]["message"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.sampled_from(["name", "url", "method", "headers", "x"]), inner)
            ),
            max_leaves=12,
        ).map(lambda value: json.dumps(value).encode()),
    )
)
def test_no_body_breaks_the_endpoint(fuzzed: GatewayServer, body: bytes) -> None:
    answer = post(fuzzed.url, body)
    assert answer.status_code in (200, 400)
    assert answer.json()["ok"] is (answer.status_code == 200)


@pytest.fixture(scope="module")
def fuzzed(sim: Simulator) -> Iterator[GatewayServer]:
    with gateway(sim.openai_url) as gw:
        yield gw


def test_the_endpoints_are_documented_under_the_tools_tag(sim: Simulator) -> None:
    with gateway(sim.openai_url) as gw:
        spec = httpx.get(gw.url + "/openapi.json").json()
    operations = spec["paths"]["/api/tools"]
    assert set(operations) == {"get", "post"}
    assert all(operation["tags"] == ["tools"] for operation in operations.values())
    request = operations["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert request["items"] == {"$ref": "#/components/schemas/ToolDefinition"}
    assert set(operations["post"]["responses"]) == {"200", "400", "401", "413", "503"}
    schemas = spec["components"]["schemas"]
    assert schemas["ToolsAnswer"]["properties"]["source"]["enum"] == ["file", "request", "none"]
    assert schemas["ToolDefinition"]["required"] == ["name", "url"]
    assert any(tag["name"] == "tools" for tag in spec["tags"])


# --- the override takes effect on the next turn only -----------------------------


def test_a_turn_in_flight_keeps_its_tools_the_next_one_gets_the_new_ones(
    service: Service, tmp_path: Path
) -> None:
    # Round 1 naps; round 2 asks for the weather; then the answer.
    scenario = {
        "rules": [
            {"match": {"tools": "none"}, "answer": {"content": "{last_tool_result}"}},
            {
                "match": {"tool_result": True},
                "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
            },
            {"answer": {"tool_calls": [{"name": "nap", "arguments": {}}]}},
        ]
    }
    nap = {"name": "nap", "url": service.url + "/sleep/500", "method": "GET"}
    original = [nap, *definitions(service.url, "/v1/weather/{city}")]
    replacement = [nap, *definitions(service.url, "/v2/weather/{city}")]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(original), encoding="utf-8")

    async def conversation(url: str) -> tuple[str, str, int]:
        async with websockets.connect(url.replace("http", "ws", 1) + "/ws") as ws:
            await ws.send(json.dumps({"type": "user_text", "text": "weather?"}))
            first = json.loads(await ws.recv())
            assert first["name"] == "nap"
            # The turn is running: replace the tools now.
            async with httpx.AsyncClient() as client:
                replaced = await client.post(url + "/api/tools", json=replacement)
            ends = []
            for _ in range(2):
                while (event := json.loads(await ws.recv()))["type"] != "assistant_end":
                    pass
                ends.append(event["text"])
                if len(ends) == 1:
                    await ws.send(json.dumps({"type": "user_text", "text": "again?"}))
            return ends[0], ends[1], replaced.status_code

    with (
        Simulator(SimulatorConfig.load(scenario)) as sim,
        gateway(sim.openai_url, tools_file=str(path), tool_max_iterations=2) as gw,
    ):
        in_flight, next_turn, status = asyncio.run(asyncio.wait_for(conversation(gw.url), 30))
    assert status == 200
    # The answers quote the last result (the last round's note follows it).
    assert in_flight.split("\n\n")[0] == "ok GET /v1/weather/Oslo"
    assert next_turn.split("\n\n")[0] == "ok GET /v2/weather/Oslo"


def test_a_gateway_without_server_tools_runs_those_a_post_adds(service: Service) -> None:
    # A gateway with none skips the lookup (one check a request): the check must
    # see definitions added after the start, on the very next request.
    scenario = {
        "rules": [
            {"match": {"tools": "none"}, "answer": {"content": "no tools"}},
            {"match": {"tool_result": True}, "answer": {"content": "{last_tool_result}"}},
            {"answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}},
        ]
    }
    ask = {"model": "m", "messages": [{"role": "user", "content": "weather?"}]}
    with (
        Simulator(SimulatorConfig.load(scenario)) as sim,
        gateway(sim.openai_url, tool_max_iterations=2) as gw,
    ):
        chat = gw.url + "/v1/chat/completions"
        before = httpx.post(chat, json=ask, timeout=30).json()
        assert post(gw.url, json.dumps(definitions(service.url))).status_code == 200
        after = httpx.post(chat, json=ask, timeout=30).json()
    assert before["choices"][0]["message"]["content"] == "no tools"
    assert after["choices"][0]["message"]["content"].startswith("ok GET /weather/Oslo")


# --- settings and startup -------------------------------------------------------


def test_settings_from_the_seed_s_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings()
    assert (defaults.tools_enabled, defaults.tools_file, defaults.tools_active) == (None, "", False)
    assert (defaults.tool_max_iterations, defaults.tool_timeout_secs) == (4, 15.0)
    assert defaults.tool_result_max_chars == 2000
    monkeypatch.setenv("LLM_TOOLS_FILE", "tools.json")
    monkeypatch.setenv("LLM_TOOL_MAX_ITERATIONS", "6")
    monkeypatch.setenv("LLM_TOOL_TIMEOUT_SECS", "2.5")
    monkeypatch.setenv("LLM_TOOL_RESULT_MAX_CHARS", "500")
    monkeypatch.setenv("TOOLRELAY_ADMIN_TOKEN", "tok")
    configured = Settings()
    assert configured.tools_active
    assert (configured.tool_max_iterations, configured.tool_timeout_secs) == (6, 2.5)
    assert (configured.tool_result_max_chars, configured.admin_token) == (500, "tok")
    assert "admin_token" not in configured.public_dict()
    monkeypatch.setenv("LLM_TOOLS_ENABLED", "false")
    assert not Settings().tools_active
    monkeypatch.setenv("LLM_TOOL_MAX_ITERATIONS", "-1")
    with pytest.raises(ValueError, match="LLM_TOOL_MAX_ITERATIONS"):
        Settings()


def test_settings_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "toolrelay.yaml"
    config.write_text("tools_file: tools.json\ntool_max_iterations: 2\ntools_enabled: true\n")
    settings_ = Settings(config=str(config))
    assert (settings_.tools_file, settings_.tool_max_iterations) == ("tools.json", 2)
    assert Settings(config=str(config), tool_max_iterations=7).tool_max_iterations == 7


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "tools file {path}: No such file or directory"),
        ("[]", "tools file {path}: the array holds no tool definition"),
        (
            '[{"name": "a", "url": "http://h/", "method": "GE T"}]',
            "tools file {path}: tool #0 ('a'), field 'method': 'GE T' is not an HTTP method "
            "(a token such as GET or PURGE)",
        ),
    ],
)
def test_a_bad_tools_file_stops_serve_with_a_clear_message(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "tools.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "serve", "--tools-file", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "toolrelay serve: invalid tools: " + message.format(path=path)


def test_serve_help_lists_the_tools_settings() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    for name in (
        "--tools-file",
        "LLM_TOOLS_FILE",
        "LLM_TOOLS_ENABLED",
        "LLM_TOOL_MAX_ITERATIONS",
        "LLM_TOOL_TIMEOUT_SECS",
        "LLM_TOOL_RESULT_MAX_CHARS",
    ):
        assert name in done.stdout
