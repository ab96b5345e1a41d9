"""run_command: a shell command in the working directory, confirmed by the user.

The command runs in its own process group, so that a timeout, Ctrl-C or the
end of the turn stops it and everything it started. Its output (standard
output and error, interleaved) is read up to a cap; what is beyond is drained
and counted, never kept. A shell is not confined to a folder: the
confirmation is the guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, ClassVar

from toolrelay.cli.chat.approval import Approver, Declined
from toolrelay.cli.chat.tooling import BuiltinTool
from toolrelay.cli.chat.workspace import Workspace

DEFAULT_TIMEOUT = 60.0
OUTPUT_CAP = 64 * 1024


class RunCommand(BuiltinTool):
    name = "run_command"
    description = (
        "Run a shell command in the working directory and get its exit status and output "
        "(standard output and error). The user confirms each command."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the shell command line"}},
        "required": ["command"],
    }

    def __init__(
        self,
        workspace: Workspace,
        approver: Approver,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        output_cap: int = OUTPUT_CAP,
    ) -> None:
        super().__init__(workspace)
        self.approver = approver
        self.timeout = timeout
        self.output_cap = output_cap

    async def call(self, *, max_chars: int, command: str) -> str:
        if not await self.approver.approve(f"run `{command}`"):
            raise Declined(f"the user did not allow running `{command}`")
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=self.workspace.root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        output = _Output(self.output_cap)
        try:
            assert process.stdout is not None
            await asyncio.wait_for(output.read(process.stdout), self.timeout)
            status = await process.wait()
        except asyncio.TimeoutError:
            _kill(process)
            await process.wait()
            return f"timed out after {self.timeout:g} s, stopped\n{output.text()}"
        finally:
            if process.returncode is None:
                _kill(process)  # cancelled: the turn is over
        return f"exit status {status}\n{output.text()}"


class _Output:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        if self.dropped:
            text += f"\n[output cut: {self.dropped} more bytes]"
        return text


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
