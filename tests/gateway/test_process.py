"""The serving process: proxy headers (X-Forwarded-Proto, -For) are read only
when ``serve`` is told which proxies to trust (what they change shows in a
redirect's scheme); the garbage collector is settled once the app is built."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_a_worker_settles_the_collector_once_its_app_is_built() -> None:
    # In a process of its own: a frozen collector would outlive this test.
    probe = (
        "import gc; from toolrelay.server.app import YOUNG_THRESHOLD, app_from_environment; "
        "before = gc.get_freeze_count(); app_from_environment(); "
        "print(before, gc.get_freeze_count() > 0, gc.get_threshold()[0] == YOUNG_THRESHOLD)"
    )
    env = {**os.environ, "TOOLRELAY_BACKEND": "http://127.0.0.1:9/v1"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["0", "True", "True"], done.stderr
