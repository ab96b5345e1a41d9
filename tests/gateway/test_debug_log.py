"""Issue 23, item 7: at ``--log-level debug`` no credential reaches the log —
not the gateway's API keys, not the admin token, not a backend's key — for
HTTP requests and WebSocket handshakes alike."""

from __future__ import annotations

import asyncio
import logging
import os

import httpx
import websockets

from tests.gateway.serve_process import serve_process
from toolrelay.server.logs import RedactSecrets
from toolrelay.simulator import Simulator, SimulatorConfig

CLIENT_KEY = "gw-key-3f9a1c77"
OTHER_KEY = "gw-key-b2e4d018"
ADMIN = "admin-token-5d6e7f80"
BACKEND_KEY = "backend-key-0a1b2c3d"


async def _websocket_turns(url: str) -> None:
    for headers in ({"Authorization": f"Bearer {CLIENT_KEY}"}, {"x-api-key": OTHER_KEY}):
        async with websockets.connect(
            url.replace("http", "ws", 1) + "/ws", additional_headers=headers, open_timeout=30
        ) as ws:
            await ws.send('{"type": "ping"}')
            await asyncio.wait_for(ws.recv(), 30)


def test_debug_logs_hold_no_credential() -> None:
    env = {
        **os.environ,
        "TOOLRELAY_API_KEYS": f"{CLIENT_KEY},{OTHER_KEY}",
        "TOOLRELAY_ADMIN_TOKEN": ADMIN,
        "TOOLRELAY_API_KEY": BACKEND_KEY,
    }
    with Simulator(SimulatorConfig()) as sim:
        args = ("--backend", sim.openai_url, "--log-level", "debug")
        with serve_process(*args, env=env) as served:
            auth = {"authorization": f"Bearer {CLIENT_KEY}"}
            body = {"model": "toolrelay-sim", "messages": [{"role": "user", "content": "hi"}]}
            reply = httpx.post(served.url + "/v1/chat/completions", json=body, headers=auth,
                               timeout=30)  # fmt: skip
            assert reply.status_code == 200
            admin = {"authorization": f"Bearer {ADMIN}"}
            listed = httpx.get(served.url + "/api/tools", headers=admin, timeout=30)
            assert listed.status_code == 200
            asyncio.run(_websocket_turns(served.url))
    log = served.log
    # The handshake was logged at debug (so the check below looked at something)...
    assert "GET /ws" in log, log[-2000:]
    # ...and no secret is anywhere in the log.
    for secret in (CLIENT_KEY, OTHER_KEY, ADMIN, BACKEND_KEY):
        assert secret not in log


def test_the_filter_hides_credential_headers_whatever_their_shape() -> None:
    redact = RedactSecrets(["s3cr3t-value"])
    shapes = [
        ("< Authorization: Bearer %s", ("abc-123",)),
        ("headers=%r", ([(b"x-api-key", b"abc-123")],)),
        ("%s", ("{'Cookie': 'session=abc-123'}",)),
        ("token s3cr3t-value used", ()),
    ]
    for message, args in shapes:
        record = logging.LogRecord("t", logging.DEBUG, __file__, 1, message, args, None)
        redact.filter(record)
        shown = record.getMessage()
        assert "abc-123" not in shown and "s3cr3t-value" not in shown, shown
