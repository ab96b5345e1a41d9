"""What the chat tests ask of the processes a command started."""

from __future__ import annotations

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may be slow to reap it)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True
