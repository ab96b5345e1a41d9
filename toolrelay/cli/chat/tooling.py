"""What the chat agent's built-in tools share: a declaration, the workspace,
and failures the model can read."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from toolrelay.cli.chat.approval import Declined
from toolrelay.cli.chat.workspace import OutsideWorkspace, Workspace
from toolrelay.io.tools import ToolOutput
from toolrelay.types import ToolSource

# Seconds a built-in's work (reading, listing, searching, writing) may take.
DEFAULT_TIMEOUT = 15.0
_Result = TypeVar("_Result")


class ToolFailure(Exception):
    """An expected failure (no such file, a bad pattern): its text goes to the model."""


class BuiltinTool(ABC):
    """A tool of the agent itself; subclasses set the declaration and ``call``."""

    name = ""
    description = ""
    source: ToolSource = "client"  # the chat agent's own
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self, workspace: Workspace, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.workspace = workspace
        self.timeout = timeout

    async def in_thread(self, work: Callable[..., _Result], *args: Any) -> _Result:
        """``work(*args)`` in a worker thread, given up on after the tool timeout.

        A thread cannot be stopped: one that overran finishes on its own (the
        tools bound what they read, so it does), but the turn goes on now.
        """
        try:
            return await asyncio.wait_for(asyncio.to_thread(work, *args), self.timeout)
        except asyncio.TimeoutError:
            raise ToolFailure(f"{self.name} did not finish within {self.timeout:g} s") from None

    def declaration(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        try:
            return ToolOutput(await self.call(max_chars=max_chars, **arguments))
        except (ToolFailure, OutsideWorkspace, Declined) as exc:
            return ToolOutput(f"Error: {exc}", is_error=True)
        except OSError as exc:
            where = f" ({self.workspace.show(exc.filename)})" if exc.filename else ""
            return ToolOutput(f"Error: {exc.strerror or exc}{where}", is_error=True)

    @abstractmethod
    async def call(self, *args: Any, **arguments: Any) -> str:
        """The result text; raises ToolFailure (or OSError) for the model to read."""
