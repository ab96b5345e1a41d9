"""Build hook of toolrelay-core: the core's files of ../toolrelay, nothing else.

The core is every module of the package except the outer layers (io, server,
cli, simulator) and ``__main__`` (the command line's); tests/layers checks
that it imports nothing of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

OUTER = frozenset({"io", "server", "cli", "simulator", "__main__.py"})


class CoreFiles(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        package = Path(self.root).parent / "toolrelay"
        for path in sorted(package.rglob("*")):
            inside = path.relative_to(package)
            if inside.parts[0] in OUTER or "__pycache__" in inside.parts:
                continue
            if path.suffix == ".py" or path.name == "py.typed":
                build_data["force_include"][str(path)] = f"toolrelay/{inside.as_posix()}"
