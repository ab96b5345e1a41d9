"""``ToolRegistry.idle``: the one check that lets a request skip the server-tools
lookup. It must never skip a tool a turn would run, whatever was defined by the
file, replaced through ``POST /api/tools`` or offered by another source."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.io.tools import HttpToolClient, ToolDefinition, parse_definitions
from toolrelay.io.tools.registry import MemoryToolStore, ToolRegistry
from toolrelay.io.tools.source import SourcedTool


class _Source:
    """A source offering nothing (an MCP server not connected yet), or whose tools
    changed: ``idle`` cannot know without asking it, so it must say no."""

    revision = 0

    def tools(self, taken: Collection[str]) -> Sequence[SourcedTool]:
        return []

    def health(self) -> list[dict[str, Any]]:
        return []

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


names = st.lists(st.sampled_from(["ping", "weather", "search"]), unique=True, max_size=3)


def _definitions(chosen: list[str]) -> tuple[ToolDefinition, ...]:
    if not chosen:
        return ()  # no tools file (an API override is never empty)
    return parse_definitions(
        [{"name": name, "url": f"http://127.0.0.1:9/{name}"} for name in chosen]
    )


@given(file=names, replaced=st.none() | names.filter(bool), with_source=st.booleans())
def test_idle_only_when_a_turn_would_get_no_tool(
    file: list[str], replaced: list[str] | None, with_source: bool
) -> None:
    store = MemoryToolStore(_definitions(file))
    if replaced is not None:
        asyncio.run(store.replace(_definitions(replaced)))
    registry = ToolRegistry(store, HttpToolClient(), sources=[_Source()] if with_source else [])
    in_force = file if replaced is None else replaced
    assert registry.idle() == (not with_source and not in_force)
    if registry.idle():
        assert not len(registry.toolbox())
    if len(registry.toolbox()):
        assert not registry.idle()
