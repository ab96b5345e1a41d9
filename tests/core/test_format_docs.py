"""docs/formats.md and the registry agree: every family of the format survey maps to a
registered format, and every registered format is documented."""

from __future__ import annotations

import re
from pathlib import Path

from toolrelay.formats import FORMATS, format_names

DOC = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (\d+[ab]?|—) \| .* \| (`[a-z0-9_]+`(?:, `[a-z0-9_]+`)*) \|$", re.M)


def test_every_family_row_names_registered_formats() -> None:
    # Families outside the survey share the number "—": a list, not a dict, keeps them all.
    rows = [(number, re.findall(r"`([a-z0-9_]+)`", names)) for number, names in ROW.findall(DOC)]
    numbered = {n for n, _ in rows if n[:-1].isdigit() or n.isdigit()}
    assert {str(n) for n in range(1, 37)} <= numbered  # the survey's 36 families
    named = {name for _, names in rows for name in names}
    assert named <= set(format_names()), named - set(format_names())
    assert set(format_names()) <= named, set(format_names()) - named


def test_every_format_has_its_families_for_list_formats() -> None:
    for fmt in FORMATS:
        assert fmt.families, fmt.name
        assert f"`{fmt.name}`" in DOC, fmt.name
