"""The agent's file tools: read_file, list_directory, search_files, write_file.

Every path goes through :class:`Workspace` first. Reading and searching run
in a worker thread, under the tool timeout, so that Ctrl-C and the spinner
stay responsive on a big tree; what they return is bounded before it is built.
Only regular files are read: a FIFO, a device or a socket could block a read
forever or never end, so they are refused (and skipped by the search). The
search runs the model's pattern with RE2, whose matching is linear in the
text: no pattern (``(a+)+$``), whatever the files hold, can make it run away.
Symlink loops are skipped and named in a note.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, ClassVar

import re2

from toolrelay.cli.chat.approval import Approver, Declined
from toolrelay.cli.chat.tooling import DEFAULT_TIMEOUT, BuiltinTool, ToolFailure
from toolrelay.cli.chat.workspace import OutsideWorkspace, Workspace

# Folders nobody means when they search a project.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"})
MAX_ENTRIES = 500
MAX_MATCHES = 200
MAX_SEARCHED_BYTES = 2 * 1024 * 1024
# read_file reads at most this much of a file (it answers in pieces of max_chars anyway).
MAX_READ_BYTES = 32 * 1024 * 1024
_BINARY_SNIFF = 8192
_NOTE_ROOM = 80
_LOOPS_SHOWN = 5
# The ``path`` parameter every file tool takes.
_PATH = {"type": "string", "description": "file path, relative to the working directory"}


class ReadFile(BuiltinTool):
    name = "read_file"
    description = (
        "Read a text file in the working directory. Long files come in pieces: "
        "pass start_line to read further."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "description": "first line (default 1)",
            },
        },
        "required": ["path"],
    }

    async def call(self, *, max_chars: int, path: str, start_line: int = 1) -> str:
        target = self.workspace.resolve(path)
        return await self.in_thread(_read, target, path, start_line, max_chars)


def _read(target: Path, path: str, start_line: int, max_chars: int) -> str:
    if target.is_dir():
        raise ToolFailure(f"{path} is a directory (list_directory shows what is in it)")
    data = _read_regular(target, path, MAX_READ_BYTES)
    if b"\x00" in data[:_BINARY_SNIFF]:
        raise ToolFailure(f"{path} is a binary file")
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    if start_line > max(len(lines), 1):
        raise ToolFailure(f"{path} has {len(lines)} lines; start_line {start_line} is past the end")
    out: list[str] = []
    size = 0
    end = start_line - 1
    budget = max_chars - _NOTE_ROOM  # the note on where to read on must fit too
    for line in lines[start_line - 1 :]:
        if size + len(line) > budget and out:
            break
        out.append(line)
        size += len(line)
        end += 1
    text = "".join(out)
    if end < len(lines) or start_line > 1:
        text += f"\n[lines {start_line}-{end} of {len(lines)}; start_line={end + 1} reads on]"
    return text


class ListDirectory(BuiltinTool):
    name = "list_directory"
    description = "List a directory of the working directory: sub-directories end with /."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "directory, default: the working directory"}
        },
    }

    async def call(self, *, max_chars: int, path: str = ".") -> str:
        target = self.workspace.resolve(path)
        return await self.in_thread(_listing, target, path)


def _listing(target: Path, path: str) -> str:
    if not target.is_dir():
        raise ToolFailure(f"{path} is not a directory")
    entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    lines = []
    for entry in entries[:MAX_ENTRIES]:
        if entry.is_symlink():
            lines.append(f"{entry.name}@")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            lines.append(f"{entry.name}  ({entry.stat().st_size} bytes)")
    if len(entries) > MAX_ENTRIES:
        lines.append(f"… and {len(entries) - MAX_ENTRIES} more")
    return "\n".join(lines) if lines else f"{path} is empty"


class SearchFiles(BuiltinTool):
    name = "search_files"
    description = (
        "Search the text files under a directory for a regular expression (RE2 syntax: "
        "no backreferences or lookarounds); answers path:line: text for each matching line."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "regular expression"},
            "path": {"type": "string", "description": "where to search, default: everywhere"},
            "glob": {"type": "string", "description": "only files named like this, e.g. *.py"},
        },
        "required": ["pattern"],
    }

    async def call(self, *, max_chars: int, pattern: str, path: str = ".", glob: str = "*") -> str:
        try:
            expression = re2.compile(pattern)
        except re2.error as exc:
            raise ToolFailure(f"bad pattern {pattern!r}: {exc}") from None
        target = self.workspace.resolve(path)
        return await self.in_thread(_search, self.workspace, target, expression, glob)


def _search(workspace: Workspace, top: Path, expression: Any, glob: str) -> str:
    loops: list[str] = []
    files = [top] if top.is_file() else _walk(workspace, top, glob, loops)
    found: list[str] = []
    for file in files:
        try:
            data = _read_regular(file, workspace.show(file), MAX_SEARCHED_BYTES, whole=True)
        except (OSError, ToolFailure):
            continue  # gone, unreadable, too large, or not a regular file: not searched
        if b"\x00" in data[:_BINARY_SNIFF]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if expression.search(line):
                found.append(f"{workspace.show(file)}:{number}: {line.strip()[:200]}")
                if len(found) == MAX_MATCHES:
                    found.append(f"[stopped at {MAX_MATCHES} matches]")
                    return "\n".join([*found, *_loop_note(loops)])
    return "\n".join([*found, *_loop_note(loops)] if found else ["no match", *_loop_note(loops)])


def _loop_note(loops: list[str]) -> list[str]:
    if not loops:
        return []
    shown = ", ".join(loops[:_LOOPS_SHOWN]) + (" …" if len(loops) > _LOOPS_SHOWN else "")
    return [f"[skipped {len(loops)} symlink loop{'s' if len(loops) > 1 else ''}: {shown}]"]


def _walk(workspace: Workspace, top: Path, glob: str, loops: list[str]) -> list[Path]:
    if not top.is_dir():
        raise ToolFailure(f"{workspace.show(top)} does not exist")
    files = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(folder, name)
            if not path.match(glob):
                continue
            try:
                workspace.resolve(str(path))  # a link out of the workspace is not followed
                path.stat()
            except OutsideWorkspace:
                continue
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    loops.append(workspace.show(path))
                continue
            files.append(path)
    return files


def _read_regular(target: Path, path: str, limit: int, *, whole: bool = False) -> bytes:
    """At most ``limit`` bytes of a regular file (all of it, or a failure, with ``whole``).

    Opened without blocking and checked once open: a FIFO (which would wait
    for a writer), a device or a socket is refused whatever the path led to.
    """
    _check_regular(os.stat(target).st_mode, path)  # a socket cannot even be opened
    descriptor = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        _check_regular(os.fstat(descriptor).st_mode, path)  # swapped in since the stat
        data = file.read(limit + 1)
    if len(data) > limit:
        if whole:
            raise ToolFailure(f"{path} is larger than {limit} bytes")
        data = data[:limit]
    return data


def _check_regular(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):
        raise ToolFailure(f"{path} is not a regular file ({_kind(mode)}): it is not read")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


class WriteFile(BuiltinTool):
    name = "write_file"
    description = (
        "Write a text file in the working directory (created with its folders, or "
        "replaced). The user confirms each write."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": _PATH,
            "content": {"type": "string", "description": "the whole new content"},
        },
        "required": ["path", "content"],
    }

    def __init__(
        self, workspace: Workspace, approver: Approver, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        super().__init__(workspace, timeout)
        self.approver = approver

    async def call(self, *, max_chars: int, path: str, content: str) -> str:
        target = self.workspace.resolve(path)
        if target.is_dir():
            raise ToolFailure(f"{path} is a directory")
        size = len(content.encode())
        what = "replace" if target.exists() else "create"
        shown = self.workspace.show(target)
        if not await self.approver.approve(f"{what} {shown} ({size} bytes)"):
            raise Declined(f"the user did not allow writing {shown}")
        await self.in_thread(_write, target, content)
        return f"wrote {size} bytes to {shown}"


def _write(target: Path, content: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")


def file_tools(
    workspace: Workspace, approver: Approver, timeout: float = DEFAULT_TIMEOUT
) -> list[Any]:
    return [
        ReadFile(workspace, timeout),
        ListDirectory(workspace, timeout),
        SearchFiles(workspace, timeout),
        WriteFile(workspace, approver, timeout),
    ]
