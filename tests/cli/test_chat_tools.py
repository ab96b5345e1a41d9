"""The chat agent's built-in tools, run as the loop runs them (Toolbox.run on a
call) on real files and real processes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.processes import alive
from toolrelay.cli.chat.approval import AlwaysApprove, AskUser, NobodyToAsk
from toolrelay.cli.chat.toolbox import ToolOptions, build_toolbox
from toolrelay.cli.chat.workspace import OutsideWorkspace, Workspace
from toolrelay.events import ToolCall
from toolrelay.io.tools import ToolOutput


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def main():\n    return 42\n")
    (folder / "README.md").write_text("hello\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("def main(): not this\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return folder


def run(root: Path, name: str, approver: Any = None, **arguments: Any) -> ToolOutput:
    options = ToolOptions(Workspace.at(root), approver or AlwaysApprove(), max_chars=500,
                          command_timeout=2.0)  # fmt: skip
    toolbox, _ = build_toolbox(options)
    call = ToolCall("call_1", name, arguments)
    return asyncio.run(toolbox.run(call))


@pytest.mark.parametrize(
    "path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "~/.bashrc", "a\x00b"]
)
def test_paths_out_of_the_workspace_are_refused(root: Path, path: str) -> None:
    with pytest.raises(OutsideWorkspace):
        Workspace.at(root).resolve(path)
    output = run(root, "read_file", path=path)
    assert (
        output.is_error and "outside the working directory" in output.text
    ) or "NUL" in output.text


def test_a_symlink_out_is_resolved_before_the_check(root: Path) -> None:
    (root / "escape").symlink_to(root.parent)
    (root / "inside").symlink_to(root / "src")
    output = run(root, "read_file", path="escape/secret.txt")
    assert output.is_error and "outside the working directory" in output.text
    assert run(root, "read_file", path="inside/app.py").text.startswith("def main")
    written = run(root, "write_file", path="escape/new.txt", content="x")
    assert written.is_error and not (root.parent / "new.txt").exists()


def test_no_confine_reaches_anywhere(root: Path) -> None:
    workspace = Workspace.at(root, confined=False)
    assert workspace.resolve("../secret.txt") == root.parent / "secret.txt"


def test_read_file_in_pieces(root: Path) -> None:
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 201)))
    first = run(root, "read_file", path="long.txt")
    assert first.text.startswith("line 1\n")
    assert first.text.endswith("[lines 1-53 of 200; start_line=54 reads on]")
    later = run(root, "read_file", path="long.txt", start_line=195)
    assert later.text == "".join(f"line {n}\n" for n in range(195, 201)) + (
        "\n[lines 195-200 of 200; start_line=201 reads on]"
    )
    past = run(root, "read_file", path="long.txt", start_line=500)
    assert past.is_error and "has 200 lines" in past.text


@pytest.mark.parametrize(
    ("path", "message"),
    [("src", "is a directory"), ("missing.txt", "No such file"), ("blob.bin", "binary file")],
)
def test_read_file_errors_the_model_can_read(root: Path, path: str, message: str) -> None:
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01")
    output = run(root, "read_file", path=path)
    assert output.is_error
    assert output.text.startswith("Error: ") and message in output.text


def test_list_directory(root: Path) -> None:
    (root / "link").symlink_to(root / "README.md")
    assert run(root, "list_directory").text == (".git/\nsrc/\nREADME.md  (6 bytes)\nlink@")
    assert run(root, "list_directory", path="src").text == "app.py  (26 bytes)"
    assert run(root, "list_directory", path="README.md").is_error


def test_search_files(root: Path) -> None:
    (root / "escape").symlink_to(root.parent / "secret.txt")
    assert run(root, "search_files", pattern=r"def \w+").text == "src/app.py:1: def main():"
    assert run(root, "search_files", pattern="secret").text == "no match"
    assert run(root, "search_files", pattern="hello", glob="*.py").text == "no match"
    bad = run(root, "search_files", pattern="(")
    assert bad.is_error and "bad pattern" in bad.text


def test_write_file_asks_first(root: Path) -> None:
    asked: list[str] = []

    def answer(question: str) -> str:
        asked.append(question)
        return "y" if len(asked) == 1 else "n"

    done = run(root, "write_file", AskUser(answer), path="docs/new.md", content="# new\n")
    assert done.text == "wrote 6 bytes to docs/new.md"
    assert (root / "docs" / "new.md").read_text() == "# new\n"
    refused = run(root, "write_file", AskUser(answer), path="README.md", content="gone")
    assert refused.is_error and "did not allow" in refused.text
    assert (root / "README.md").read_text() == "hello\n"
    assert asked == [
        "allow the agent to create docs/new.md (6 bytes)? [y/N] ",
        "allow the agent to replace README.md (4 bytes)? [y/N] ",
    ]


def test_nobody_to_ask_means_no(root: Path) -> None:
    output = run(root, "run_command", NobodyToAsk(), command="touch made")
    assert output.is_error and "toolrelay chat --yes" in output.text
    assert not (root / "made").exists()


def test_run_command(root: Path) -> None:
    output = run(root, "run_command", command="pwd; echo oops >&2; exit 3")
    assert output.text == f"exit status 3\n{root}\noops\n"


def test_run_command_timeout_stops_the_whole_group(root: Path) -> None:
    started = time.monotonic()
    output = run(root, "run_command", command="(sleep 30; touch late) & echo $! > pid; wait")
    assert time.monotonic() - started < 10
    assert output.text.startswith("timed out after 2 s, stopped")
    assert not alive(int((root / "pid").read_text()))


def test_run_command_output_is_capped(root: Path) -> None:
    output = run(root, "run_command", command="yes x | head -c 200000")
    assert "[output cut: 134464 more bytes]" in (output.raw or "")
    assert len(output.text) <= 500 + len("… [truncated]")
