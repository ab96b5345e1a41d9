"""Fixtures the chat tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.chat_scenario import NOTES


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text(NOTES)
    return folder
