"""Without a redis-server the shared-state tests say why: skipped locally, failed under CI."""

from __future__ import annotations

import shutil

import pytest

from tests.shared.redis_server import redis_server_binary


def test_a_missing_redis_server_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="redis-server is not installed"):
        redis_server_binary()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="scripts/install installs"):
        redis_server_binary()
