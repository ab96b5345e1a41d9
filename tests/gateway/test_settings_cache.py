"""``Settings.round_options`` is worked out once per model (and backend) and handed
out as a copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.settings import Settings
from toolrelay.server.reading import own_options


def test_round_options_are_cached_per_model_and_copied(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    config = {
        "backends": [
            {"name": "main", "url": "http://127.0.0.1:9/v1", "format": "hermes"},
            {"name": "small", "url": "http://127.0.0.1:8/v1", "profile": "graded"},
        ],
        "models": {"tiny": {"backend": "small", "validation": "warn"}},
    }
    path.write_text(json.dumps(config))
    configured = Settings(config=str(path))
    fresh = Settings(config=str(path))
    for model in ("tiny", "other", "tiny", "other"):
        options = configured.round_options(model)
        assert options == fresh._round_options(model)
        options["profile"] = "changed by a request"  # build_round adds its own choices
    assert configured.round_options("tiny")["profile"] == "graded"
    assert configured.round_options("tiny")["validate"] == "warn"
    assert configured.round_options("other")["format"] == "hermes"


_CONFIGURED = Settings(
    backend="http://127.0.0.1:9/v1",
    models={"tiny": {"validation": "warn", "profile": "graded"}, "big": {"format": "hermes"}},
)


@settings(max_examples=100, deadline=None)
@given(models=st.lists(st.sampled_from(["tiny", "big", "other", "bench"]), max_size=8))
def test_a_requests_options_are_the_settings_kept_or_not(models: list[str]) -> None:
    """A request's reading takes round_options' kept options itself (the method is a
    Python frame): cold or kept, they are what round_options gives, a copy that a
    request's own choices do not reach."""
    _CONFIGURED.kept_round_options.clear()
    for model in models:
        options: dict[str, Any] = own_options({}, _CONFIGURED, model, None).round_options
        assert options == _CONFIGURED._round_options(model)
        options["profile"] = "changed by a request"
        assert _CONFIGURED.round_options(model) == _CONFIGURED._round_options(model)
        assert _CONFIGURED.kept_round_options[(model, None)] == _CONFIGURED._round_options(model)


def test_round_options_are_cached_per_backend_too(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    config = {
        "backends": [
            {"name": "a", "url": "http://127.0.0.1:9/v1", "format": "hermes", "models": ["m"]},
            {"name": "b", "url": "http://127.0.0.1:8/v1", "format": "mistral", "models": ["m"]},
        ],
    }
    path.write_text(json.dumps(config))
    settings = Settings(config=str(path))
    fresh = Settings(config=str(path))
    replicas = settings.backend_configs_for("m")
    assert [b.name for b in replicas] == ["a", "b"]
    for backend in (*replicas, *replicas, None):
        assert settings.round_options("m", backend) == fresh._round_options("m", backend)
    assert settings.round_options("m", replicas[1])["format"] == "mistral"
    assert settings.round_options("m")["format"] == "hermes"


def test_made_up_model_names_do_not_grow_the_cache() -> None:
    settings = Settings()
    for i in range(3000):
        settings.round_options(f"made-up-{i}")
    assert len(settings._lookups.options) <= 1024
