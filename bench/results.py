"""bench/RESULTS.md: each benchmark owns one ``## `` section and rewrites only that."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def write_section(heading: str, section: str) -> None:
    """Replace the section under the heading line ``heading`` (or append it).

    The whole line is matched, so "## Parser" is not "## Parser scaling".
    """
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = ("\n" + text).find("\n" + heading + "\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(heading))
        following = "\n" + text[end + 1 :] if end != -1 else ""
        text = text[:start] + section.rstrip("\n") + "\n" + following
    RESULTS.write_text(text.rstrip("\n") + "\n")
