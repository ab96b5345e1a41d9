"""Issue 23, items 1 to 3, over real HTTP: tool definitions held to the limits of a
request body, HTTP tools that do not follow redirects off their origin, and the
secrets of definitions never shown."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engine.support import weather_tool
from tests.gateway.support import gateway
from tests.tools.service import Service
from toolrelay.io.settings import Settings
from toolrelay.io.tools import HttpTool, HttpToolClient, ToolOutput, parse_definitions
from toolrelay.io.tools.definition import (
    MAX_FIELD_DEPTH,
    ToolDefinitionError,
    check_parameters,
    definition_problem,
)
from toolrelay.io.tools.registry import ToolsError
from toolrelay.server import create_app
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig

SECRET = "sk-third-party-5f2c9e"
ASK = [{"role": "user", "content": "hello"}]


def nested_schema(depth: int) -> dict[str, Any]:
    """Parameters whose JSON nests exactly ``depth`` containers deep."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 3):
        schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"a": schema}}


def post_tools(url: str, body: Any, token: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url + "/api/tools", content=json.dumps(body), headers=headers, timeout=30)


def chat_works(url: str) -> None:
    """A plain chat request, streamed and not, answers 200."""
    body = {"model": "toolrelay-sim", "messages": ASK}
    assert httpx.post(url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=30
    ) as streamed:
        assert streamed.status_code == 200
        assert "[DONE]" in streamed.read().decode()


# Item 1: one request broke the gateway until restart.


def test_a_definition_nested_300_deep_is_refused_whole_and_breaks_nothing(
    sim: Simulator, service: Service
) -> None:
    good = weather_tool(service.url)
    deep = {"name": "deep", "url": service.url + "/deep", "parameters": nested_schema(300)}
    with gateway(sim.openai_url) as gw:
        assert post_tools(gw.url, [good]).status_code == 200
        refused = post_tools(gw.url, [{**good, "name": "other"}, deep])
        assert refused.status_code == 400, refused.text
        message = refused.json()["error"]["message"]
        assert "tool #1 ('deep'), field 'parameters'" in message
        assert f"deeper than {MAX_FIELD_DEPTH} levels" in message
        # Refused whole: what was in force still is, and every later request works.
        listed = httpx.get(gw.url + "/api/tools", timeout=30)
        assert listed.status_code == 200
        assert [tool["name"] for tool in listed.json()["tools"]] == ["get_weather"]
        chat_works(gw.url)


def test_the_deepest_accepted_definition_works_in_every_later_request(
    sim: Simulator, service: Service
) -> None:
    # Just inside the limit: accepted, declared to the model, listed, and nothing fails.
    schema = nested_schema(MAX_FIELD_DEPTH)
    assert definition_problem({"parameters": schema}) is None
    deepest = {"name": "deepest", "url": service.url + "/deep", "parameters": schema}
    with gateway(sim.openai_url) as gw:
        assert post_tools(gw.url, [deepest]).status_code == 200
        assert httpx.get(gw.url + "/api/tools", timeout=30).status_code == 200
        chat_works(gw.url)


def test_a_tools_file_with_the_same_schema_stops_the_start(
    sim: Simulator, service: Service, tmp_path: Path
) -> None:
    path = tmp_path / "tools.json"
    deep = {"name": "deep", "url": service.url + "/deep", "parameters": nested_schema(300)}
    path.write_text(json.dumps([deep]), encoding="utf-8")
    with pytest.raises(ToolsError, match=r"tool #0 \('deep'\), field 'parameters'"):
        create_app(Settings(backend=sim.openai_url, tools_file=str(path)))


def test_a_tools_file_larger_than_the_body_limit_stops_the_start(
    sim: Simulator, service: Service, tmp_path: Path
) -> None:
    path = tmp_path / "tools.json"
    padded = {**weather_tool(service.url), "description": "x" * 5000}
    path.write_text(json.dumps([padded]), encoding="utf-8")
    with pytest.raises(ToolsError, match="larger than 4096 bytes"):
        create_app(Settings(backend=sim.openai_url, tools_file=str(path), max_body_bytes=4096))


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("description", "\ud800 lone surrogate", "cannot be written as JSON"),
        ("parameters", {"type": "object", "maximum": 2**70}, "cannot be written as JSON"),
        ("parameters", nested_schema(MAX_FIELD_DEPTH + 1), "deeper than"),
    ],
)
def test_definition_problem_names_the_field(field: str, value: Any, reason: str) -> None:
    problem = definition_problem({"name": "t", field: value})
    assert problem is not None and problem[0] == field and reason in problem[1]


# Item 2: HTTP tools followed redirects to other hosts and ports, with their headers.


class Redirector(BackgroundServer):
    """Answers ``/away`` with a redirect to ``target``, ``/same/{status}`` with one
    to its own ``/final``, and ``/final`` with 200; records what it was sent."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.seen: list[tuple[str, str, dict[str, str]]] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await self.serve(scope, receive, send)

        super().__init__(app)

    async def serve(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["method"], path, headers))
        status, location = 200, ""
        if path.startswith("/away/"):
            status, location = int(path.rsplit("/", 1)[1]), self.target
        elif path.startswith("/same/"):
            status, location = int(path.rsplit("/", 1)[1]), "/final"
        elif path == "/loop":
            status, location = 302, "/loop"
        out = [(b"location", location.encode())] if location else []
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": f"at {path}".encode()})


def run_tool(url: str, method: str, follow: bool = False) -> ToolOutput:
    definition = {
        "name": "t",
        "url": url,
        "method": method,
        "headers": {"X-Api-Key": SECRET},
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    (tool,) = parse_definitions([definition])

    async def main() -> ToolOutput:
        client = HttpToolClient(timeout=10, follow_redirects=follow)
        try:
            return await HttpTool(tool, client).run({"q": "data"}, 2000)
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize(("status", "method"), [(302, "GET"), (307, "POST"), (308, "PUT")])
def test_a_redirect_to_another_origin_is_never_followed(
    service: Service, status: int, method: str, follow: bool
) -> None:
    before = len(service.recorder.requests)
    with Redirector(service.url + "/stolen") as redirector:
        output = run_tool(redirector.url + f"/away/{status}", method, follow)
    assert output.is_error
    assert f"HTTP {status} redirect to {service.url}/stolen not followed" in output.text
    # Neither the key nor the method and body went to the other port.
    assert service.recorder.requests[before:] == []


def test_same_origin_redirects_are_followed_only_when_asked(service: Service) -> None:
    with Redirector(service.url) as redirector:
        refused = run_tool(redirector.url + "/same/307", "POST")
        followed = run_tool(redirector.url + "/same/307", "POST", follow=True)
        looped = run_tool(redirector.url + "/loop", "GET", follow=True)
        seen = list(redirector.seen)
    assert refused.is_error and "tool_follow_redirects is off" in refused.text
    assert (followed.is_error, followed.text) == (False, "at /final")
    # A 307 keeps the method (and the headers stay on the same origin).
    assert [(method, path) for method, path, _ in seen[1:3]] == [
        ("POST", "/same/307"),
        ("POST", "/final"),
    ]
    assert looped.is_error and "more than 5 redirects" in looped.text


# The model calls the gateway's tool, then says what it got.
CALLS_LOOKUP = {
    "rules": [
        {"match": {"tool_result": "."}, "answer": {"content": "got: {last_tool_result}"}},
        {
            "match": {"tools": "native"},
            "answer": {"content": "", "tool_calls": [{"name": "lookup", "arguments": {}}]},
        },
        {"answer": {"content": "no tools offered"}},
    ]
}


def test_the_gateway_refuses_redirects_by_default_and_follows_same_origin_when_set(
    tmp_path: Path,
) -> None:
    assert Settings().tool_follow_redirects is False
    answers = {}
    with (
        Redirector("http://127.0.0.1:9/x") as redirector,
        Simulator(SimulatorConfig.load(CALLS_LOOKUP)) as sim,
    ):
        path = tmp_path / "tools.json"
        lookup = {"name": "lookup", "url": redirector.url + "/same/302", "method": "GET"}
        path.write_text(json.dumps([lookup]), encoding="utf-8")
        for follow in (False, True):
            with gateway(sim.openai_url, tools_file=str(path), tool_follow_redirects=follow) as gw:
                reply = gw.client().chat.completions.create(model="toolrelay-sim", messages=ASK)
                answers[follow] = reply.choices[0].message.content
    assert answers[False] is not None and "tool_follow_redirects is off" in answers[False]
    assert answers[True] == "got: at /final"


# Item 3: GET /api/tools showed header values verbatim, to anyone.


def test_get_api_tools_hides_header_values_and_url_credentials(
    sim: Simulator, service: Service
) -> None:
    definition = {
        "name": "lookup",
        "url": service.url + "/find/{q}?format=3&api_key=" + SECRET + "&token={q}",
        "method": "GET",
        "headers": {"Authorization": "Bearer " + SECRET, "X-Api-Key": SECRET},
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    with gateway(sim.openai_url) as gw:
        posted = post_tools(gw.url, [definition])
        listed = httpx.get(gw.url + "/api/tools", timeout=30)
        health = httpx.get(gw.url + "/health", timeout=30)
    for answer in (posted, listed, health):
        assert answer.status_code == 200
        assert SECRET not in answer.text
    (shown,) = listed.json()["tools"]
    assert shown["headers"] == {"Authorization": "***", "X-Api-Key": "***"}
    assert shown["url"] == service.url + "/find/{q}?format=3&api_key=***&token={q}"


def test_get_api_tools_takes_the_admin_token_when_one_is_set(
    sim: Simulator, service: Service
) -> None:
    with gateway(sim.openai_url, admin_token="admin-7c1d") as gw:
        assert post_tools(gw.url, [weather_tool(service.url)], "admin-7c1d").status_code == 200
        refused = httpx.get(gw.url + "/api/tools", timeout=30)
        allowed = httpx.get(
            gw.url + "/api/tools", headers={"authorization": "Bearer admin-7c1d"}, timeout=30
        )
    assert refused.status_code == 401
    assert refused.json()["error"]["message"].startswith("GET /api/tools needs the admin token")
    assert allowed.status_code == 200


def test_serve_beyond_loopback_without_an_admin_token_refuses_to_start() -> None:
    args = [sys.executable, "-m", "toolrelay", "serve", "--host", "0.0.0.0", "--port", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "TOOLRELAY_ADMIN_TOKEN" in done.stderr
    assert "TOOLRELAY_TOOLS_API_OPEN" in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x?api_key=" + SECRET,
        "http://user:" + SECRET + "@127.0.0.1:9/x",
        "http://127.0.0.1:99999/x?token=" + SECRET,
    ],
)
def test_a_failed_tool_request_never_shows_the_url_s_credentials(url: str) -> None:
    (tool,) = parse_definitions([{"name": "t", "url": url, "method": "GET"}])

    async def main() -> ToolOutput:
        client = HttpToolClient(timeout=10)
        try:
            return await HttpTool(tool, client).run({}, 2000)
        finally:
            await client.aclose()

    output = asyncio.run(main())
    assert output.is_error and output.text.startswith("Error: tool request failed")
    assert SECRET not in output.text


def test_an_mcp_schema_meets_the_same_limits() -> None:
    """An MCP server's inputSchema is checked as a definition's parameters, depth included:
    a schema no request could carry is refused before it is installed."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(300):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(ToolDefinitionError) as refused:
        check_parameters(deep)
    assert refused.value.field == "parameters"
    assert check_parameters({"type": "object", "properties": {"x": {"type": "string"}}})
