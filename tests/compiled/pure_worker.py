"""toolrelay as plain Python, whatever setup.py compiled beside it.

``python pure_worker.py DIR`` imports every ``toolrelay`` module from its source
file under ``DIR`` (never from an extension built there), then answers one JSON
line on stdin with one on stdout: ``["parse", text, tools, format]`` with what
``parse_tool_calls`` returns, ``["stream", chunks, tools, format, reasoning_open]``
with every event a ``StreamParser`` emits, both as :func:`plain` values.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any


class SourceOnly(importlib.abc.MetaPathFinder):
    """Finds ``toolrelay`` and its modules as source files under one directory."""

    def __init__(self, package: Path) -> None:
        self.package = package

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "toolrelay" and not name.startswith("toolrelay."):
            return None
        base = self.package.joinpath(*name.split(".")[1:])
        if (base / "__init__.py").is_file():
            return importlib.util.spec_from_file_location(
                name, base / "__init__.py", submodule_search_locations=[str(base)]
            )
        if base.with_suffix(".py").is_file():
            return importlib.util.spec_from_file_location(name, base.with_suffix(".py"))
        return None


def plain(value: Any) -> Any:
    """``value`` as JSON: a dataclass as its type's name and its fields, a call's
    id (random, ``call_`` and hex) as its length."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(fields.get("id"), str) and fields["id"].startswith("call_"):
            fields["id"] = f"call_ of {len(fields['id'])}"
        return {"type": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    return value


def answer(request: list[Any]) -> Any:
    from toolrelay import StreamParser, parse_tool_calls

    kind, *args = request
    if kind == "parse":
        text, tools, format = args
        return plain(parse_tool_calls(text, tools, format))
    chunks, tools, format, reasoning_open = args
    parser = StreamParser(tools, format, reasoning_open=reasoning_open)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return plain([*events, *parser.close()])


def reply(request: list[Any]) -> Any:
    """:func:`answer`, or the error it raised (the test compares failures too), as JSON."""
    try:
        return {"ok": answer(request)}
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}


def main() -> None:
    sys.meta_path.insert(0, SourceOnly(Path(sys.argv[1])))
    import toolrelay.stream

    # Said once, first: where this worker's parser came from.
    print(json.dumps(toolrelay.stream.__file__), flush=True)
    for line in sys.stdin:
        print(json.dumps(reply(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
