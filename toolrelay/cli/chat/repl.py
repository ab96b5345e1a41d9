"""The interactive chat: line editing and history (readline), multi-line
messages, Ctrl-C cancels the turn in progress (or clears the line at the
prompt), Ctrl-D leaves.

A line ending in a backslash goes on on the next line; a line holding only
three double quotes starts a block that the next such line ends. ``/reset``
forgets the conversation, ``/exit`` leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text

from toolrelay.cli.chat.session import ChatSession
from toolrelay.cli.chat.view import TurnView
from toolrelay.io.backends import BackendError

PROMPT = "you› "
MORE = "...  "
BLOCK = '"""'
HISTORY_LENGTH = 1000


def history_file() -> Path:
    """Where typed lines are kept between sessions: ``TOOLRELAY_HISTORY`` or
    ``$XDG_STATE_HOME/toolrelay/chat_history``."""
    explicit = os.environ.get("TOOLRELAY_HISTORY")
    if explicit:
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "toolrelay" / "chat_history"


def read_message(ask: Callable[[str], str] = input) -> str:
    """One message, over as many lines as it takes; EOFError on Ctrl-D."""
    first = ask(PROMPT)
    if first.strip() == BLOCK:
        lines = []
        while (line := ask(MORE)).strip() != BLOCK:
            lines.append(line)
        return "\n".join(lines)
    lines = [first]
    while lines[-1].endswith("\\"):
        lines[-1] = lines[-1][:-1]
        lines.append(ask(MORE))
    return "\n".join(lines)


class Repl:
    """Runs turns on ``loop``, the event loop the session's connections live on."""

    def __init__(
        self, session: ChatSession, console: Console, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.session = session
        self.console = console
        self.loop = loop

    def run(self, banner: Text) -> int:
        history = _start_history()
        self.console.print(banner)
        try:
            while True:
                try:
                    text = read_message()
                except EOFError:
                    self.console.print()
                    return 0
                except KeyboardInterrupt:
                    self.console.print()  # Ctrl-C at the prompt: a fresh line
                    continue
                command = text.strip()
                if command in ("/exit", "/quit"):
                    return 0
                if command == "/reset":
                    self.session.reset()
                    self.console.print(Text("conversation forgotten", style="dim"))
                elif command:
                    self._turn(text)
        finally:
            if history is not None:
                _save_history(history)

    def _turn(self, text: str) -> None:
        view = TurnView(self.console, max_tokens=self.session.max_tokens)
        task = self.loop.create_task(self.session.turn(text, view))
        # Ctrl-C during the turn cancels it: the backend request and tools stop.
        self.loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            self.loop.run_until_complete(task)
        except asyncio.CancelledError:
            view.close()
            self.console.print(Text("turn cancelled", style="yellow"))
        except BackendError as exc:
            view.close()
            self.console.print(Text(f"the backend failed: {exc.message}", style="red"))
        finally:
            self.loop.remove_signal_handler(signal.SIGINT)


def _start_history() -> Path | None:
    try:
        import readline
    except ImportError:  # a Python without readline: plain input, no history
        return None
    path = history_file()
    readline.set_history_length(HISTORY_LENGTH)
    with contextlib.suppress(OSError):  # the first session, or an unreadable file
        readline.read_history_file(path)
    return path


def _save_history(path: Path) -> None:
    import readline

    with contextlib.suppress(OSError):  # history is a convenience, never a reason to fail
        path.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(path)
