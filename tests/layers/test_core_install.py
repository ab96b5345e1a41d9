"""The library installs alone: ``pip install ./core`` (toolrelay-core, built
from the same tree) into a fresh venv brings the core and what it needs, and
nothing of the gateway, the CLI or the simulator, nor their dependencies.

The one test here that reaches beyond loopback: pip fetches the build backend
(hatchling) and the core's two dependencies from the package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

from tests.layers.test_layers import CORE

ROOT = Path(__file__).parents[2]
# The gateway's and the CLI's dependencies: none may come with the core.
NOT_WANTED = (
    "starlette",
    "uvicorn",
    "aiohttp",
    "httpx",
    "pydantic",
    "pydantic_settings",
    "redis",
    "prometheus_client",
    "jinja2",
    "rich",
    "yaml",
    "swagger_ui",
    "websockets",
)
CHECK = """
import importlib, importlib.util, json, sys
import toolrelay
for name in {core!r}:
    importlib.import_module(name)
tools = [{{"type": "function", "function": {{"name": "get_weather",
    "parameters": {{"type": "object", "properties": {{"city": {{"type": "string"}}}}}}}}}}]
result = toolrelay.parse_tool_calls(
    'Checking.<tool_call>{{"name": "get_weather", "arguments": {{"city": "Oslo"}}}}</tool_call>',
    tools,
)
parser = toolrelay.StreamParser(tools)
streamed = [type(e).__name__ for d in ("<tool_call>{{", '"name": "get_weather", ', "}}</tool_call>")
            for e in parser.feed(d)] + [type(e).__name__ for e in parser.close()]
print(json.dumps({{
    "file": toolrelay.__file__,
    "calls": [[c.name, c.arguments] for c in result.calls],
    "content": result.content,
    "streamed": streamed,
    "outer": [n for n in ("toolrelay.io", "toolrelay.server", "toolrelay.cli",
                          "toolrelay.simulator", "toolrelay.__main__")
              if importlib.util.find_spec(n) is not None],
    "unwanted": [n for n in {unwanted!r} if importlib.util.find_spec(n) is not None],
}}))
"""


def test_the_core_installs_alone_and_parses(tmp_path: Path) -> None:
    # Nothing of this interpreter's path may leak into the fresh one.
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(ROOT / "core")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=environ,
    )
    assert installed.returncode == 0, installed.stderr
    script = CHECK.format(core=CORE, unwanted=NOT_WANTED)
    done = subprocess.run(
        [str(python), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environ,
        cwd=tmp_path,  # not the clone: the installed package is the one imported
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["file"].startswith(str(env))
    assert found["calls"] == [["get_weather", {"city": "Oslo"}]]
    assert found["content"] == "Checking."
    assert found["streamed"][0] == "ToolCallStart" and found["streamed"][-1] == "ToolCallEnd"
    assert found["outer"] == []
    assert found["unwanted"] == []
