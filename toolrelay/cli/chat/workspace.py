"""The folder the chat agent's file tools may touch.

A path the model gives is resolved against the root with every symlink and
``..`` followed first, and only then checked: ``notes/../../etc/passwd`` and a
link ``data -> /`` both end outside and are refused. The check is as good as
the file system is still: a link swapped in between the check and the use is
not caught (the agent runs as its user, on that user's files).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path


class OutsideWorkspace(ValueError):
    """A path that leads out of the working directory."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    # False: any path the user's account can reach (``--no-confine``).
    confined: bool = True

    @classmethod
    def at(cls, root: str | Path, *, confined: bool = True) -> Workspace:
        return cls(Path(root).resolve(strict=True), confined)

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the root, or absolute) made absolute, symlinks
        and ``..`` resolved; OutsideWorkspace when it leaves the root."""
        if "\x00" in path:
            raise OutsideWorkspace("a path cannot hold a NUL character")
        try:
            resolved = (self.root / Path(path).expanduser()).resolve(strict=False)
        except RuntimeError:  # Python before 3.13 says "Symlink loop" so
            raise OSError(errno.ELOOP, "a symlink loop", path) from None
        if self.confined and not resolved.is_relative_to(self.root):
            raise OutsideWorkspace(
                f"{path} is outside the working directory {self.root} (symlinks and .. resolved)"
            )
        return resolved

    def show(self, path: str | Path) -> str:
        """How a path is named back to the model: relative to the root when inside."""
        path = Path(path)
        if path == self.root:
            return "."
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)
