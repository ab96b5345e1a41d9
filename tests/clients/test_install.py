"""A client that cannot be installed is said so: skipped here, failed under CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients import support
from tests.clients.install import install


def test_without_npm_the_npm_clients_say_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOLRELAY_CLIENTS_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    reason = install(["codex"])["codex"]
    assert reason is not None and "npm is not installed" in reason
    assert not any(tmp_path.iterdir())  # nothing half-installed left behind


def test_a_missing_client_is_skipped_locally_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(support, "_outcomes", {"codex": "npm is not installed"})
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="npm is not installed"):
        support.installed("codex")
    assert support.unavailable() == {"codex": "npm is not installed"}
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="npm is not installed"):
        support.installed("codex")
