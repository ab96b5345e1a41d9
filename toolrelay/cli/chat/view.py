"""How a turn looks: the streamed answer, each tool call and its (shortened)
result, the path each round took, the loop guard's verdicts, a spinner while
the model thinks.

Interactive, everything goes to one console and the answer streams as it
comes. One-shot, the trace goes to standard error and the answer alone to
standard output once the turn is over, so that ``toolrelay chat -m … > file``
keeps just the answer. Rich writes plain text when its stream is not a terminal.
"""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.status import Status
from rich.text import Text

from toolrelay.cli.chat.session import RoundPath
from toolrelay.io.engine import (
    AgentEvent,
    AssistantDelta,
    AssistantReasoning,
    LoopGuard,
    RoundEnd,
    RoundStart,
    ToolCallRequested,
    ToolResult,
    TurnEnd,
)

SHOWN_ARGUMENTS = 200
SHOWN_RESULT = 300


class TurnView:
    """Renders one turn.

    ``answer`` is None when the answer streams on the trace console
    (interactive); otherwise the trace gets each round's prose once the round
    turns out to be a tool round, and ``answer`` gets the final text.
    """

    def __init__(self, trace: Console, answer: Console | None = None) -> None:
        self.trace = trace
        self.answer = answer
        self.started = time.monotonic()
        self.status: Status | None = None
        self.prose: list[str] = []
        self.streaming = False
        # The path of the round in progress, shown on its calls.
        self.path: RoundPath | None = None
        self.paths: list[str] = []

    def event(self, event: AgentEvent, path: RoundPath | None) -> None:
        if isinstance(event, RoundStart):
            self.path = None
            self._spin("thinking…")
        elif isinstance(event, AssistantDelta):
            self._stop_spinner()
            self._prose(event.text)
        elif isinstance(event, AssistantReasoning):
            self._spin("reasoning…")
        elif isinstance(event, ToolCallRequested):
            self._end_prose()
            arguments = _short(
                json.dumps(event.call.arguments, ensure_ascii=False), SHOWN_ARGUMENTS
            )
            shown = f"  · {self.path.describe()}" if self.path else ""
            self.trace.print(
                Text.assemble(
                    ("⚙ ", "cyan"), (event.call.name, "bold cyan"), f" {arguments}", (shown, "dim")
                )
            )
            # No spinner while tools run: run_command and write_file may ask the user.
        elif isinstance(event, ToolResult):
            self._stop_spinner()
            self._result(event)
        elif isinstance(event, LoopGuard):
            self._end_prose()
            self._guard(event)
        elif isinstance(event, RoundEnd):
            self._stop_spinner()
            self._round_end(path)
        elif isinstance(event, TurnEnd):
            self._turn_end(event)

    def close(self) -> None:
        """The turn ended early (cancelled, failed): leave the terminal tidy."""
        self._stop_spinner()
        self._end_prose()

    # --- pieces ---------------------------------------------------------------------

    def _spin(self, what: str) -> None:
        if self.status is None:
            self.status = self.trace.status(what, spinner="dots")
            self.status.start()
        else:
            self.status.update(what)

    def _stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def _prose(self, text: str) -> None:
        if self.answer is None:
            self.trace.print(text, end="", markup=False, highlight=False, soft_wrap=True)
            # Whether a line is left open, to be ended before anything else is shown.
            self.streaming = not text.endswith("\n")
        else:
            self.prose.append(text)

    def _end_prose(self) -> None:
        """Prose before a call: finish the line, or show the held text in the trace."""
        if self.streaming:
            self.trace.print()
            self.streaming = False
        if self.prose:
            text = "".join(self.prose).strip()
            if text:
                self.trace.print(Text(text, style="italic"))
            self.prose = []

    def _result(self, event: ToolResult) -> None:
        if event.blocked:
            style, label = "yellow", "blocked by the loop guard: "
        elif event.is_error:
            style, label = "red", ""
        else:
            style, label = "dim", ""
        text = " ".join(event.content.split())
        shown = _short(text, SHOWN_RESULT)
        size = f" ({len(event.content)} chars)" if len(shown) < len(text) else ""
        self.trace.print(Text(f"  ↳ {label}{shown}{size}", style=style))

    def _guard(self, event: LoopGuard) -> None:
        verdict = event.verdict
        tools = ", ".join(verdict.tool_names) or "no tool"
        text = f"⚠ loop guard: {verdict.pattern} ×{verdict.count} on {tools} ({verdict.level})"
        self.trace.print(Text(text, style="yellow"))

    def _round_end(self, path: RoundPath | None) -> None:
        if path is not None:
            self.paths.append(path.mode)
        self.path = path

    def _turn_end(self, end: TurnEnd) -> None:
        if self.answer is None:
            if self.streaming:
                self.trace.print()
                self.streaming = False
        else:
            self.prose = []  # the last round's prose is the answer itself
            ending = "" if end.content.endswith("\n") else "\n"
            self.answer.print(
                end.content, end=ending, markup=False, highlight=False, soft_wrap=True
            )
        if self.path is not None and self.path.notes:
            # The last round called nothing: its path has not been shown yet.
            self.trace.print(Text(f"· {self.path.describe()}", style="dim"))
        if end.warning:
            self.trace.print(Text(f"⚠ {end.warning}", style="yellow"))
        paths = " + ".join(dict.fromkeys(self.paths)) or "no tools used"
        seconds = time.monotonic() - self.started
        rounds = f"{end.rounds} round{'s' if end.rounds != 1 else ''}"
        self.trace.print(Text(f"· {paths} · {rounds} · {seconds:.1f} s", style="dim"))


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def consoles(interactive: bool) -> tuple[Console, Console | None]:
    """(trace, answer) consoles: one for everything, or stderr and stdout."""
    # soft_wrap: lines are left to the terminal to wrap, never broken by rich.
    if interactive:
        return Console(highlight=False, soft_wrap=True), None
    return Console(stderr=True, highlight=False, soft_wrap=True), Console(
        highlight=False, soft_wrap=True
    )
