"""Who says yes before the agent writes a file or runs a command."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import Protocol


class Approver(Protocol):
    async def approve(self, action: str) -> bool:
        """Whether ``action`` (a sentence: "write 12 bytes to notes.txt") may happen."""
        ...


class Declined(Exception):
    """The user refused, or nobody could be asked; the text says which."""


class AlwaysApprove:
    """``--yes``."""

    async def approve(self, action: str) -> bool:
        return True


class NobodyToAsk:
    """Standard input is not a terminal: nothing that needs a yes can happen."""

    async def approve(self, action: str) -> bool:
        raise Declined(
            f"not allowed to {action}: nobody can confirm it (standard input is not "
            "a terminal); the user can allow it with toolrelay chat --yes"
        )


class AskUser:
    """Asks on the terminal. Ctrl-C at the question cancels the whole turn."""

    def __init__(self, ask: Callable[[str], str] = input) -> None:
        self._ask = ask

    async def approve(self, action: str) -> bool:
        # The turn is paused while the user thinks: blocking the loop is fine.
        # Ctrl-C must interrupt the question itself, so it raises here as usual.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            answer = self._ask(f"allow the agent to {action}? [y/N] ")
        except KeyboardInterrupt:
            raise asyncio.CancelledError from None
        except EOFError:
            return False
        finally:
            signal.signal(signal.SIGINT, previous)
        _forget(answer)
        return answer.strip().lower() in ("y", "yes")


def _forget(answer: str) -> None:
    """Keep a y/n out of the line history, where the user's messages are."""
    readline = sys.modules.get("readline")
    if readline is None or not answer:
        return
    last = readline.get_current_history_length()
    if last > 0 and readline.get_history_item(last) == answer:
        readline.remove_history_item(last - 1)
