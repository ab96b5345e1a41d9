"""Model names clients insist on, and the names the backends serve.

Claude Code asks for ``claude-sonnet-4-5-…`` and its haiku model, Codex for
``gpt-5-codex``, whatever the user chose: names no model server serves. An
alias maps a client's name to a backend's (``serve --model-alias
CLIENT=BACKEND``, repeatable, or a string value under ``models:`` in the
config file); the client's side may be an fnmatch glob (``claude-*``).
``--model`` is the catch-all: a name no alias matches and no backend lists
goes to that model. A name a backend lists goes as it is. Which names the
backends serve is learned from their model lists (at startup and on every
``GET /v1/models``); until a list is in, every name counts as not served.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

log = logging.getLogger("toolrelay.models")

_GLOB = frozenset("*?[")


def parse_alias(text: str) -> tuple[str, str]:
    """``CLIENT=BACKEND`` as a pair; a ValueError saying what is wrong."""
    client, sep, backend = text.partition("=")
    client, backend = client.strip(), backend.strip()
    if not sep or not client or not backend:
        raise ValueError(f"model alias {text!r} must be CLIENT_NAME=BACKEND_MODEL")
    return client, backend


@dataclass(frozen=True)
class Resolved:
    """The backend's model for a client's name, and why."""

    model: str
    # alias: an alias matched (``pattern`` says which); catch_all: ``--model``;
    # as_is: the name itself (served, or nothing else applies).
    how: Literal["alias", "catch_all", "as_is"]
    pattern: str | None = None


class ModelNames:
    """Client model names to backend model names (thread-safe counters)."""

    def __init__(self, aliases: Iterable[tuple[str, str]], catch_all: str | None) -> None:
        self.aliases = list(aliases)
        self.catch_all = catch_all
        # Exact names first, whatever their order: a glob never shadows a name.
        self._exact: dict[str, str] = {}
        for client, backend in self.aliases:
            if not _GLOB & set(client):
                self._exact.setdefault(client, backend)
        self._globs = [(c, b) for c, b in self.aliases if _GLOB & set(c)]
        # Without aliases and catch-all (the default) every name goes as it is.
        self._as_is = not self.aliases and catch_all is None
        self.served: set[str] = set()
        self._used: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def learn_served(self, listing: dict[str, Any]) -> None:
        """Take note of the names a backend's ``GET /models`` answer lists."""
        data = listing.get("data")
        for entry in data if isinstance(data, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                self.served.add(entry["id"])

    def backend_name(self, name: str) -> str:
        """The backend's model for ``name``: :meth:`resolve`'s, without making its
        :class:`Resolved` where no alias or catch-all can apply (every request asks)."""
        return name if self._as_is else self.resolve(name).model

    def resolve(self, name: str) -> Resolved:
        found = self._match(name)
        if found.how != "as_is":
            with self._lock:
                self._used[(name, found.model)] += 1
                first = self._used[(name, found.model)] == 1
            if first:
                why = f"alias {found.pattern}" if found.how == "alias" else "--model catch-all"
                log.info("model %r is served as %r (%s)", name, found.model, why)
        return found

    def _match(self, name: str) -> Resolved:
        exact = self._exact.get(name)
        if exact is not None:
            return Resolved(exact, "alias", name)
        for pattern, backend in self._globs:
            if fnmatchcase(name, pattern):
                return Resolved(backend, "alias", pattern)
        if self.catch_all is not None and name != self.catch_all and name not in self.served:
            return Resolved(self.catch_all, "catch_all")
        return Resolved(name, "as_is")

    def listed(self) -> list[dict[str, Any]]:
        """``/v1/models`` entries for the aliases' client names (globs are not names)."""
        return [
            {"id": client, "object": "model", "owned_by": "toolrelay", "toolrelay_alias_of": model}
            for client, model in self._exact.items()
            if client not in self.served
        ]

    def health(self) -> dict[str, Any]:
        with self._lock:
            used = [
                {"client": client, "model": model, "requests": count}
                for (client, model), count in sorted(self._used.items())
            ]
        return {
            "aliases": [{"client": c, "model": b} for c, b in self.aliases],
            "catch_all": self.catch_all,
            "served": sorted(self.served),
            "used": used,
        }
