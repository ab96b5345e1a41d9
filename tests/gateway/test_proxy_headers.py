"""Proxy headers (X-Forwarded-Proto, -For) are read only when ``serve`` is told
which proxies to trust: what they change shows in a redirect's scheme."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.serve_process import serve_process


@pytest.mark.parametrize(
    ("flags", "scheme"), [((), "http"), (("--forwarded-allow-ips", "*"), "https")]
)
def test_proxy_headers_only_when_trusted(flags: tuple[str, ...], scheme: str) -> None:
    with serve_process("--backend", "http://127.0.0.1:9/v1", *flags) as served:
        # The router sends /v1/models/ to /v1/models, naming the scheme it was asked by.
        moved = httpx.get(
            served.url + "/v1/models/", headers={"x-forwarded-proto": "https"}, timeout=30
        )
    assert moved.status_code == 307
    assert moved.headers["location"].startswith(f"{scheme}://"), moved.headers["location"]
