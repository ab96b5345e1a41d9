"""The inspector as a person uses it: Debian's chromium, driven by Playwright,
in front of ``toolrelay serve --inspector`` and ``toolrelay simulate`` (real
processes). A rescue-path request whose call is repaired, sent with the openai
SDK, appears in the live list; opened, it shows the raw answer and the repair.
A ``/ws`` turn appears beside it and opens with what the client sent and got.

Chromium comes from scripts/install (Debian's package), never from Playwright's
own download; without it the test is skipped, and fails under CI.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from websockets.sync.client import connect

from tests.gateway.inspected import QUESTION, RIGHT, WEATHER, WRONG, scenario_json
from tests.gateway.serve_process import serve_process

# The flags chromium needs on a machine with no network beyond loopback.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "inspector-admin-token"
# The live list must show the request this soon (it is pushed, not polled).
LIVE_MS = 10_000


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium", path="/usr/bin")
    if found is None:
        reason = "chromium is not installed: scripts/install installs Debian's chromium"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture
def simulator(tmp_path: Path) -> Iterator[str]:
    """``toolrelay simulate`` with the repairing model; its OpenAI base URL."""
    path = tmp_path / "scenario.json"
    path.write_text(scenario_json(), encoding="utf-8")
    command = [sys.executable, "-m", "toolrelay", "simulate", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--scenario", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "toolrelay simulate announced no URL within 30 s"
        found = re.search(r"listening on (http://\S+)", process.stdout.readline())
        assert found
        yield found.group(1) + "/v1"
    finally:
        process.terminate()
        process.wait(30)


def test_a_repaired_request_appears_live_and_shows_its_raw_answer_and_repair(
    simulator: str, tmp_path: Path
) -> None:
    chromium = _chromium()
    from playwright.sync_api import expect, sync_playwright

    env = {**os.environ, "TOOLRELAY_ADMIN_TOKEN": TOKEN}
    # Unconstrained, as in test_inspector.py: the page shows the scripted weak model's
    # own attempts and their repair (constrained rounds: test_constrained.py).
    args = ["--backend", simulator, "--tool-mode", "rescue", "--constrain", "off", "--inspector"]
    with serve_process(*args, env=env) as gateway, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh profile
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        try:
            page = browser.new_page()
            page.goto(gateway.url + "/ui")
            # The API wants the token: the page says so until it is given.
            expect(page.get_by_text("Could not load")).to_be_visible()
            page.fill("#token", TOKEN)
            page.dispatch_event("#token", "change")
            expect(page.locator("#live")).to_have_text("live")
            expect(page.get_by_role("heading", name="Recent requests")).to_be_visible()
            assert page.locator("#requests tr").count() == 0

            client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="none", max_retries=0)
            reply = client.chat.completions.create(
                model="sim",
                messages=[{"role": "user", "content": QUESTION}],
                tools=[WEATHER],  # type: ignore[list-item]
            )
            assert reply.choices[0].message.tool_calls

            # Pushed to the open page: no reload.
            row = page.locator("#requests tr").first
            expect(row.locator("[data-testid=repairs]")).to_have_text("1", timeout=LIVE_MS)
            expect(row.locator("[data-testid=path]")).to_have_text("rescue")
            expect(row).to_contain_text("200")
            row.click()

            attempts = page.locator("[data-testid=attempt]")
            expect(attempts).to_have_count(2)
            first, repair = attempts.nth(0), attempts.nth(1)
            expect(first.locator("h3")).to_have_text("Attempt 1: first")
            expect(first.locator("[data-testid=raw-text]")).to_contain_text(WRONG)
            expect(first.locator("[data-testid=rejected]")).to_contain_text(
                "there is no tool named 'get_wether'"
            )
            expect(repair.locator("h3")).to_have_text("Attempt 2: correction re-ask")
            expect(repair.locator("[data-testid=raw-text]")).to_have_text(RIGHT)
            expect(repair.locator("[data-testid=calls]")).to_contain_text('"get_weather"')
            expect(page.locator("[data-testid=client-got]")).to_contain_text("get_weather")
            page.screenshot(path=str(tmp_path / "inspector-request.png"), full_page=True)

            page.goto(gateway.url + "/ui#/models")
            expect(page.locator("[data-testid=summary]")).to_have_text(
                "sim@default: 0.0% valid on arrival, 100.0% after repair, "
                "1 rejected (unknown tool 1), text calls bracket 1"
            )
            page.screenshot(path=str(tmp_path / "inspector-models.png"), full_page=True)

            # A /ws turn is a request of its own: listed live, opened with what was said.
            page.evaluate("location.hash = '#/'")
            # (websockets' own sync client: Playwright's sync API holds this thread's loop)
            with connect(gateway.url.replace("http", "ws", 1) + "/ws") as ws:
                ws.send(json.dumps({"type": "user_text", "text": "hi"}))
                while json.loads(ws.recv(timeout=30))["type"] != "assistant_end":
                    pass
            ws_row = page.locator("#requests tr", has_text="/ws")
            expect(ws_row).to_have_count(1, timeout=LIVE_MS)
            expect(ws_row).to_contain_text("200")
            ws_row.click()
            expect(page.locator("h2")).to_contain_text("/ws")
            expect(page.locator("[data-testid=client-sent]")).to_contain_text('"hi"')
            expect(page.locator("[data-testid=client-got]")).to_contain_text("Hello.")
        finally:
            browser.close()
    assert (tmp_path / "inspector-request.png").stat().st_size > 10_000
