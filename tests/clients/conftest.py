"""The tier of real clients says, at the end of the run, which clients it could not install."""

from __future__ import annotations

import pytest

from tests.clients.support import unavailable


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    missing = unavailable()
    if not missing:
        return
    terminalreporter.section("real clients not installed: their tests were skipped")
    for name, reason in missing.items():
        terminalreporter.write_line(f"{name}: {reason}")
