"""HTTP tools against a real local service: request lines, queries, bodies,
headers, every error text, truncation, the timeout and injection attempts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.tools.service import Service
from toolrelay.events import ToolCall
from toolrelay.io.tools import (
    TRUNCATION_MARK,
    HttpTool,
    HttpToolClient,
    Toolbox,
    ToolDefinition,
    ToolOutput,
    parse_definitions,
)

EXAMPLE = Path(__file__).parents[2] / "tools.example.json"
SEED_HOSTS = (
    "https://wttr.in",
    "https://internal.example.local",
    "https://httpbin.org",
    "https://api.example.local",
)


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with Service() as running:
        yield running


def example_tools(base_url: str) -> tuple[ToolDefinition, ...]:
    """tools.example.json as written, its hosts pointed at the local stand-in."""
    text = EXAMPLE.read_text(encoding="utf-8")
    for host in SEED_HOSTS:
        text = text.replace(host, base_url)
    return parse_definitions(json.loads(text))


def run_calls(
    tools: Sequence[ToolDefinition],
    calls: Sequence[tuple[str, dict[str, Any]]],
    *,
    timeout: float = 5.0,
    max_chars: int = 2000,
) -> list[ToolOutput]:
    async def main() -> list[ToolOutput]:
        client = HttpToolClient(timeout=timeout)
        try:
            box = Toolbox([HttpTool(tool, client) for tool in tools], max_chars=max_chars)
            return [
                await box.run(ToolCall(f"call_{n}", name, arguments))
                for n, (name, arguments) in enumerate(calls)
            ]
        finally:
            await client.aclose()

    return asyncio.run(main())


def run_call(tools: Sequence[ToolDefinition], name: str, arguments: dict[str, Any], **kw: Any):
    return run_calls(tools, [(name, arguments)], **kw)[0]


def tool(url: str, method: str = "GET", **extra: Any) -> ToolDefinition:
    properties = {key: {} for key in ("id", "q", "n", "flag", "token", "tags", "opt")}
    entry = {"name": "t", "url": url, "method": method, "parameters": {"properties": properties}}
    return parse_definitions([{**entry, **extra}])[0]


# --- the seed's section-4 examples, as written ---------------------------------

SEED_REQUESTS = [
    ("list_items", {"limit": 10}, "GET", "/api/items?limit=10", b""),
    ("get_item", {"id": "5"}, "GET", "/api/items/5", b""),
    ("add_item", {"name": "lamp"}, "POST", "/api/items", b'{"name":"lamp"}'),
    ("update_item", {"id": "5", "qty": 2}, "PATCH", "/api/items/5", b'{"qty":2}'),
    ("replace_item", {"id": "5", "name": "lamp"}, "PUT", "/api/items/5", b'{"name":"lamp"}'),
    ("delete_item", {"id": "5"}, "DELETE", "/api/items/5", b""),
    ("item_exists", {"id": "5"}, "HEAD", "/api/items/5", b""),
]


@pytest.mark.parametrize(("name", "arguments", "method", "target", "body"), SEED_REQUESTS)
def test_rest_surface_makes_the_listed_requests(
    service: Service, name: str, arguments: dict[str, Any], method: str, target: str, body: bytes
) -> None:
    output = run_call(example_tools(service.url), name, arguments)
    seen = service.recorder.last
    assert (seen.method, seen.target, seen.body) == (method, target, body)
    assert not output.is_error
    if body:
        assert seen.headers["content-type"] == "application/json"
    else:
        assert "content-type" not in seen.headers
    if method == "HEAD":
        assert output.text == "HTTP 200 OK (empty body)"
    else:
        assert output.text == f"ok {method} {target.split('?')[0]}"


def test_get_weather_puts_the_city_in_the_path_not_the_query(service: Service) -> None:
    output = run_call(example_tools(service.url), "get_weather", {"city": "Paris"})
    assert service.recorder.last.target == "/Paris?format=3"
    assert output == ToolOutput("ok GET /Paris")


def test_create_note_sends_the_token_as_a_bearer_header(service: Service) -> None:
    run_call(example_tools(service.url), "create_note", {"token": "s3cr3t", "text": "buy milk"})
    seen = service.recorder.last
    assert (seen.method, seen.target) == ("POST", "/api/notes")
    assert seen.headers["authorization"] == "Bearer s3cr3t"
    # Only URL placeholders consume an argument: the header's stays in the body.
    assert json.loads(seen.body) == {"token": "s3cr3t", "text": "buy milk"}


def test_send_webhook_sends_its_fixed_header_and_json_body(service: Service) -> None:
    run_call(example_tools(service.url), "send_webhook", {"message": "door open"})
    seen = service.recorder.last
    assert (seen.method, seen.target, seen.body) == ("POST", "/post", b'{"message":"door open"}')
    assert seen.headers["x-tool"] == "audio-agent-engine"


# --- every verb ----------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "TRACE", "DELETE"])
def test_query_verbs_send_the_rest_as_query_and_no_body(service: Service, method: str) -> None:
    definition = tool(service.url + "/items/{id}?v=1", method.lower())
    run_call([definition], "t", {"id": 7, "q": "a b&c=d", "n": 2.5, "flag": True, "opt": None})
    seen = service.recorder.last
    assert seen.method == method
    assert seen.target == "/items/7?v=1&q=a%20b%26c%3Dd&n=2.5&flag=true"
    assert seen.body == b""


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "PURGE", "REPORT"])
def test_body_verbs_send_the_rest_as_json(service: Service, method: str) -> None:
    definition = tool(service.url + "/items/{id}", method.lower())
    run_call([definition], "t", {"id": "x", "n": 2, "flag": False, "tags": ["a"], "opt": None})
    seen = service.recorder.last
    assert (seen.method, seen.target) == (method, "/items/x")
    assert json.loads(seen.body) == {"n": 2, "flag": False, "tags": ["a"], "opt": None}


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "PURGE"])
def test_body_verbs_send_an_empty_object_when_nothing_is_left(
    service: Service, method: str
) -> None:
    run_call([tool(service.url + "/items/{id}", method)], "t", {"id": "9"})
    assert service.recorder.last.body == b"{}"


def test_lists_become_repeated_query_keys(service: Service) -> None:
    run_call([tool(service.url + "/search")], "t", {"tags": ["a", "b c"], "n": 1})
    assert service.recorder.last.target == "/search?tags=a&tags=b%20c&n=1"


def test_a_content_type_in_the_definition_is_sent_verbatim(service: Service) -> None:
    definition = tool(service.url + "/p", "POST", headers={"Content-Type": "application/x-json"})
    run_call([definition], "t", {"n": 1})
    assert service.recorder.last.headers["content-type"] == "application/x-json"


def test_placeholders_render_numbers_and_booleans_as_text(service: Service) -> None:
    definition = tool(service.url + "/i/{n}/{flag}", headers={"X-N": "n={n} flag={flag}"})
    run_call([definition], "t", {"n": 3, "flag": True})
    seen = service.recorder.last
    assert seen.target == "/i/3/true"
    assert seen.headers["x-n"] == "n=3 flag=true"


# --- arguments cannot change the URL's structure -------------------------------

INJECTIONS = [
    ("../admin", "/items/..%2Fadmin"),
    ("..", "/items/%2E%2E"),
    (".", "/items/%2E"),
    ("a/b", "/items/a%2Fb"),
    ("%2F", "/items/%252F"),
    ("x@evil.example", "/items/x%40evil.example"),
    ("x#frag", "/items/x%23frag"),
    ("x?admin=1", "/items/x%3Fadmin%3D1"),
    ("a\r\nHost: evil", "/items/a%0D%0AHost%3A%20evil"),
    ("é", "/items/%C3%A9"),
]


@pytest.mark.parametrize(("value", "path"), INJECTIONS)
def test_url_placeholders_are_encoded_in_place(service: Service, value: str, path: str) -> None:
    before = len(service.recorder.requests)
    output = run_call([tool(service.url + "/items/{id}")], "t", {"id": value})
    assert not output.is_error
    assert len(service.recorder.requests) == before + 1
    seen = service.recorder.last
    assert (seen.raw_path, seen.query) == (path, "")
    assert seen.headers["host"] == service.url.removeprefix("http://")


def test_an_argument_cannot_change_the_host(service: Service) -> None:
    # In the authority, an argument is encoded like anywhere else: it cannot
    # add user info or a port, and a host that does not resolve is an error.
    definition = tool("http://{id}.localhost:1/x")
    output = run_call([definition], "t", {"id": "127.0.0.1:" + service.url.rsplit(":", 1)[1]})
    assert output.is_error
    assert output.text.startswith("Error: tool request failed: ")


def test_an_empty_path_segment_is_refused(service: Service) -> None:
    before = len(service.recorder.requests)
    output = run_call([tool(service.url + "/items/{id}", "DELETE")], "t", {"id": ""})
    assert output == ToolOutput(
        "Error: invalid arguments for tool 't': 'id' must not be empty: "
        "it is a segment of the url's path",
        is_error=True,
    )
    assert len(service.recorder.requests) == before


@pytest.mark.parametrize("value", ["tok\r\nX-Evil: 1", "tok\nX-Evil: 1", "tok\rx", "tok\x00"])
def test_header_values_with_line_breaks_are_refused(service: Service, value: str) -> None:
    before = len(service.recorder.requests)
    definition = tool(service.url + "/notes", "POST", headers={"Authorization": "Bearer {token}"})
    output = run_call([definition], "t", {"token": value})
    assert output.is_error
    assert output.text == (
        "Error: invalid arguments for tool 't': 'token' must not contain line breaks (CR, LF) "
        "or NUL: it goes into header 'Authorization'"
    )
    assert len(service.recorder.requests) == before


def test_a_missing_placeholder_argument_is_an_arguments_error(service: Service) -> None:
    output = run_call([tool(service.url + "/items/{id}")], "t", {})
    assert output == ToolOutput(
        "Error: invalid arguments for tool 't': missing 'id', which the url needs", is_error=True
    )


# --- errors --------------------------------------------------------------------


def test_arguments_are_validated_before_anything_is_sent(service: Service) -> None:
    before = len(service.recorder.requests)
    output = run_call(example_tools(service.url), "replace_item", {"id": "5", "name": ["x"]})
    assert output == ToolOutput(
        "Error: invalid arguments for tool 'replace_item': 'name' must be a string; got [\"x\"]",
        is_error=True,
    )
    output = run_call(example_tools(service.url), "get_item", {})
    assert output == ToolOutput(
        "Error: invalid arguments for tool 'get_item': 'id' is required", is_error=True
    )
    assert len(service.recorder.requests) == before


def test_lossless_coercions_are_applied_before_the_request_is_built(service: Service) -> None:
    run_call(example_tools(service.url), "update_item", {"id": 5, "qty": "2"})
    seen = service.recorder.last
    assert (seen.method, seen.target, seen.body) == ("PATCH", "/api/items/5", b'{"qty":2}')


def test_unknown_tool(service: Service) -> None:
    output = run_call([tool(service.url + "/x")], "nope", {})
    assert output == ToolOutput("Error: unknown tool 'nope'", is_error=True)


def test_invalid_method_in_a_definition_built_in_code(service: Service) -> None:
    definition = ToolDefinition(name="t", url=service.url + "/x", method="GE T")
    before = len(service.recorder.requests)
    output = run_call([definition], "t", {})
    assert output == ToolOutput("Error: invalid HTTP method 'GE T' for tool 't'", is_error=True)
    assert len(service.recorder.requests) == before


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_non_2xx_status(service: Service, status: int) -> None:
    output = run_call([tool(service.url + f"/status/{status}")], "t", {})
    assert output == ToolOutput(f"Error: HTTP {status} — failed with {status}", is_error=True)


def test_network_error(service: Service) -> None:
    output = run_call([tool("http://127.0.0.1:1/x")], "t", {})
    assert output.is_error
    assert output.text.startswith("Error: tool request failed: ClientConnectorError")


def test_timeout_is_one_per_request(service: Service) -> None:
    started = time.monotonic()
    output = run_call([tool(service.url + "/slow")], "t", {}, timeout=0.3)
    assert output == ToolOutput("Error: tool request failed: no answer within 0.3 s", True)
    assert time.monotonic() - started < 3


# --- truncation and the bounded read -------------------------------------------


def test_results_are_truncated_to_the_limit_in_characters(service: Service) -> None:
    output = run_call([tool(service.url + "/chars/5000")], "t", {}, max_chars=100)
    assert output.text == "é" * 100 + TRUNCATION_MARK
    assert output.raw is not None and output.raw.startswith("é" * 101)
    exact = run_call([tool(service.url + "/chars/100")], "t", {}, max_chars=100)
    assert exact == ToolOutput("é" * 100)


def test_error_texts_are_truncated_too(service: Service) -> None:
    output = run_call([tool(service.url + "/status/500")], "t", {}, max_chars=10)
    assert output.text == "Error: HTT" + TRUNCATION_MARK
    assert output.is_error


def test_an_endless_body_is_read_only_as_far_as_the_result_needs(service: Service) -> None:
    started = time.monotonic()
    output = run_call([tool(service.url + "/endless")], "t", {}, max_chars=2000)
    assert time.monotonic() - started < 5
    assert output.text == "x" * 2000 + TRUNCATION_MARK
    assert output.raw is not None and len(output.raw) <= 4 * 2001
    assert service.recorder.endless_closed.wait(10), "the connection was not dropped"


def test_one_pooled_client_reuses_its_connection(service: Service) -> None:
    before = len(service.recorder.requests)
    run_calls([tool(service.url + "/items/{id}")], [("t", {"id": n}) for n in range(5)])
    ports = {seen.client_port for seen in service.recorder.requests[before:]}
    assert len(ports) == 1
