"""Claude Code, Codex CLI and opencode, as npm installs them, through ``toolrelay launch``.

Each runs non-interactively (``claude -p``, ``codex exec``, ``opencode run``)
with nothing but what ``toolrelay launch`` writes for it, streams its rounds,
and must run its own file or shell tool on the native and the rescue path;
Claude Code 2.1 and Codex also when the server swallows a streamed call or
the model writes its call as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients.support import (
    MODES,
    Task,
    assert_read,
    installed,
    launch,
    make_task,
    scenario,
    simulator,
)

pytestmark = pytest.mark.timeout(1200)


def _claude(task: Task) -> list[str]:
    return ["-p", task.question]


def _codex(task: Task) -> list[str]:
    # exec: non-interactive, approval "never"; the repository check is for humans.
    return ["exec", "--skip-git-repo-check", task.question]


def _opencode(task: Task) -> list[str]:
    return ["run", task.question]


# client id in install.PINNED -> (launch name, the client's own tool, its arguments, argv)
CLIENTS: dict[str, tuple[str, str, dict[str, Any], Any]] = {
    "claude-2.1": ("claude", "Read", {"file_path": "{path}"}, _claude),
    "claude-2.0": ("claude", "Read", {"file_path": "{path}"}, _claude),
    "codex": ("codex", "exec_command", {"cmd": "cat {path}"}, _codex),
    "opencode": ("opencode", "read", {"filePath": "{path}"}, _opencode),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pinned", sorted(CLIENTS))
def test_client_runs_its_own_tool_through_launch(pinned: str, mode: str, tmp_path: Path) -> None:
    bin_dir = installed(pinned)
    name, tool, arguments, argv = CLIENTS[pinned]
    task = make_task(tmp_path)
    with simulator(tmp_path, scenario(tool, arguments)) as model_server:
        result = launch(
            name, model_server + "/v1", mode, argv(task), folder=tmp_path, bin_dir=bin_dir
        )
    assert_read(result, task, tmp_path)


# What servers do to streamed calls, on the native path: a round whose call the
# server's parser swallows (the stream ends empty), and a call the model writes
# as text because the server has no parser for it.
TROUBLES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "swallowed-stream": ({}, ("--swallow-streamed-calls",)),
    "call-as-text": ({"text_calls": True}, ()),
}


@pytest.mark.parametrize("trouble", sorted(TROUBLES))
@pytest.mark.parametrize("pinned", ["claude-2.1", "codex"])
def test_client_survives_what_servers_do_to_calls(
    pinned: str, trouble: str, tmp_path: Path
) -> None:
    bin_dir = installed(pinned)
    name, tool, arguments, argv = CLIENTS[pinned]
    options, switches = TROUBLES[trouble]
    task = make_task(tmp_path)
    with simulator(tmp_path, scenario(tool, arguments, **options), *switches) as model_server:
        result = launch(
            name, model_server + "/v1", "native", argv(task), folder=tmp_path, bin_dir=bin_dir
        )
    assert_read(result, task, tmp_path)


# With a model name of its own catalogue, Codex sends its tools as an
# additional_tools input item, and its shell is reached through the custom
# ``exec`` tool: JavaScript that calls the nested exec_command tool.
_CODEX_EXEC = 'const out = await tools.exec_command({cmd: "cat {path}"}); text(out);'


@pytest.mark.parametrize("mode", MODES)
def test_codex_with_a_model_of_its_catalogue(mode: str, tmp_path: Path) -> None:
    bin_dir = installed("codex")
    task = make_task(tmp_path)
    rules = scenario("exec", {"input": _CODEX_EXEC}, model="gpt-6-astra")
    with simulator(tmp_path, rules) as model_server:
        result = launch(
            "codex", model_server + "/v1", mode, _codex(task), folder=tmp_path, bin_dir=bin_dir
        )
    assert_read(result, task, tmp_path)
