"""``doctor --save FILE``: what doctor found, written into a config file that
``toolrelay serve --config FILE`` and ``toolrelay chat --config FILE`` read.

A new file gets the whole snippet. An existing one keeps everything it has:
the model's entry is updated (the keys doctor decides replaced, others such
as ``profile`` kept) and the backend is added only when the file names none
for this URL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from toolrelay.io.settings import ModelOverride, load_config_file

# The keys of a model's entry that doctor decides.
DECIDED = ("tool_mode", "format", "omit_tool_choice")


def merged_config(existing: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """``existing`` with ``found`` (a :meth:`Report.config`) folded in.

    Raises ValueError when the file's backends leave no place for this one."""
    config = dict(existing)
    url = found["backend"]
    [(model, settings)] = found["models"].items()
    entry = dict(config.get("models", {}).get(model) or {})
    for key in DECIDED:
        entry.pop(key, None)
    entry.update(settings)
    if config.get("backends"):
        backends = list(config["backends"])
        entry["backend"] = _backend_named(backends, url, found["backend_kind"])
        config["backends"] = backends
    elif "backend" in config and config["backend"] != url:
        raise ValueError(
            f"it configures another backend ({config['backend']}); list both under "
            "`backends:` first, or save to another file"
        )
    else:
        config["backend"] = url
        config.setdefault("backend_kind", found["backend_kind"])
    ModelOverride.model_validate(entry)  # a clear error now rather than at serve's start
    config["models"] = {**(config.get("models") or {}), model: entry}
    return config


def _backend_named(backends: list[Any], url: str, kind: str) -> str:
    """The name of the listed backend at ``url``, appended when missing."""
    for backend in backends:
        if isinstance(backend, dict) and str(backend.get("url", "")).rstrip("/") == url:
            return str(backend.get("name", "default"))
    names = {b.get("name", "default") for b in backends if isinstance(b, dict)}
    name = next(n for n in ("doctor", *(f"doctor-{i}" for i in range(2, 100))) if n not in names)
    backends.append({"name": name, "url": url, "kind": kind})
    return name


def save(path: str, found: dict[str, Any]) -> None:
    """Write ``found`` into the config file at ``path`` (created when missing)."""
    existing = load_config_file(path) if Path(path).exists() else {}
    config = merged_config(existing, found)
    text = (
        json.dumps(config, indent=2) + "\n"
        if path.endswith(".json")
        else yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    )
    Path(path).write_text(text, encoding="utf-8")


def snippet(found: dict[str, Any]) -> str:
    """The config as YAML, ready to paste."""
    return yaml.safe_dump(found, sort_keys=False, allow_unicode=True)
