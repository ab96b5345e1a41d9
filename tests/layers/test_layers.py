"""The layer rule, checked: the core imports nothing of io, server, cli or the
simulator; no module-level import cycle among toolrelay's modules; and the
package's public names are exactly ``toolrelay.__all__``.

The modules are found by walking the source tree, so a new module is checked
the day it lands.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import toolrelay

PACKAGE = Path(toolrelay.__file__).parent
OUTER = ("toolrelay.io", "toolrelay.server", "toolrelay.cli", "toolrelay.simulator")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_outer(name: str) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in OUTER)


CORE = sorted(name for name in MODULES if not _is_outer(name) and name != "toolrelay.__main__")


def test_the_core_is_a_real_set_of_modules() -> None:
    # What the next test imports: the parser, the formats, repair, validation,
    # the rescue prompt, the stuck detector...
    for expected in (
        "toolrelay.parse",
        "toolrelay.stream",
        "toolrelay.formats.hermes",
        "toolrelay.repair",
        "toolrelay.validate",
        "toolrelay.rescue",
        "toolrelay.stuck.detector",
        "toolrelay.types",
    ):
        assert expected in CORE
    assert not any(_is_outer(name) for name in CORE)


def test_importing_the_core_loads_nothing_of_the_outer_layers() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "toolrelay.stuck.detector" in loaded  # the import did run
    assert [name for name in loaded if _is_outer(name)] == []


def _module_level_imports(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """The toolrelay modules a module imports when it is imported (not those
    imported inside functions or under ``if TYPE_CHECKING``)."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_package)
                for alias in node.names:
                    # ``from package import module`` imports the module too.
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in MODULES else base)
            elif isinstance(node, ast.If) and _type_checking(node.test):
                visit(node.orelse)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.stmt)] or [])
                        for handler in inner:
                            if isinstance(handler, ast.ExceptHandler):
                                visit(handler.body)

    visit(tree.body)
    return {module for module in found if module in MODULES}


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = _module_level_imports(tree, name, path.name == "__init__.py") - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in sorted(graph):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    return components


def test_no_import_cycle_among_toolrelay_modules() -> None:
    graph = _graph()
    assert graph["toolrelay.stream"] >= {"toolrelay.formats", "toolrelay.formats.markers"}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_exported_members() -> None:
    # As httpx's test_exported_members: every public name of the package is in
    # __all__, sorted, and nothing else is (its submodules aside).
    public = [
        name
        for name, value in vars(toolrelay).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    ]
    assert toolrelay.__all__ == sorted(public)
    # design.md's library contract.
    assert {
        "parse_tool_calls",
        "StreamParser",
        "ToolCall",
        "ParseResult",
        "RejectedCall",
        "ContentDelta",
        "ReasoningDelta",
        "ToolCallStart",
        "ToolCallArgumentsDelta",
        "ToolCallEnd",
        "CallRejected",
    } <= set(toolrelay.__all__)


def test_no_core_module_hides_an_import_of_toolrelay_in_a_function() -> None:
    # How a cycle hides from the graph above: formats.reasoning once imported the
    # stream parser inside a method (the stream parser imports the formats).
    hidden = []
    for name in CORE:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if (
                        isinstance(node, ast.ImportFrom)
                        and (node.level or (node.module or "").startswith("toolrelay"))
                    ) or (
                        isinstance(node, ast.Import)
                        and any(alias.name.startswith("toolrelay") for alias in node.names)
                    ):
                        hidden.append(f"{name}.{function.name}")
    assert hidden == []
