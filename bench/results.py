"""bench/RESULTS.md: each benchmark owns one ``## `` section and rewrites only that."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def write_section(heading: str, section: str) -> None:
    """Replace the section that starts with ``heading`` (or append it)."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = text.find(heading)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + section + (text[end + 1 :] if end != -1 else "")
    RESULTS.write_text(text.rstrip("\n") + "\n")
