"""MCP tool names (pure): whatever the servers call their tools, the names the
model sees are valid function names, unique, apart from the taken ones, and
a tool's own name whenever nothing else wants it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.io.mcp.config import ServerConfig
from toolrelay.io.mcp.tools import MAX_NAME, build_tools

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SCHEMA = {"type": "object", "properties": {}}


@dataclass
class Listed:
    """A server's listing, as build_tools reads it from a connection."""

    config: ServerConfig
    tools: tuple[types.Tool, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.config.name


tool_names = st.text(alphabet=st.sampled_from("abcxyz_-.:/ é0"), min_size=1, max_size=80)
server_names = st.text(alphabet=st.sampled_from("abc_-1"), min_size=1, max_size=8)
listings = st.dictionaries(server_names, st.lists(tool_names, max_size=6, unique=True), max_size=4)
taken_names = st.frozensets(st.sampled_from(["abc", "a_b", "read_file", "x"]), max_size=3)


def listed(servers: dict[str, list[str]]) -> list[Any]:
    return [
        Listed(
            ServerConfig(name, "stdio", command="x"),
            tuple(types.Tool(name=tool, input_schema=SCHEMA) for tool in tools),
        )
        for name, tools in servers.items()
    ]


@given(listings, taken_names, st.sampled_from(["auto", "prefixed"]))
def test_names_are_valid_unique_and_apart_from_the_taken(
    servers: dict[str, list[str]], taken: frozenset[str], naming: Any
) -> None:
    tools, skipped = build_tools(listed(servers), taken, naming, 1.0)
    names = [tool.name for tool in tools]
    assert all(VALID.fullmatch(name) for name in names)
    assert len(set(names)) == len(names)
    assert not set(names) & taken
    # Every tool is offered: a name is never a reason to leave one out.
    assert not skipped
    assert len(tools) == sum(len(t) for t in servers.values())


@given(listings)
def test_a_tool_nobody_else_wants_keeps_its_own_name(servers: dict[str, list[str]]) -> None:
    tools, _ = build_tools(listed(servers), frozenset(), "auto", 1.0)
    wanted = [_own(tool) for tools in servers.values() for tool in tools]
    # The names prefixed ones become (another tool's own name may be one of them).
    prefixed = {
        _own(server + "__" + tool)
        for server, names in servers.items()
        for tool in names
        if wanted.count(_own(tool)) > 1
    }
    for tool in tools:
        own = _own(tool.tool.name)
        if wanted.count(own) == 1 and own not in prefixed:
            assert tool.name == own
        else:
            assert tool.name.startswith(re.sub(r"[^A-Za-z0-9_-]", "_", tool.server) + "__")


def _own(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:MAX_NAME]


def test_a_name_another_tool_is_given_with_its_server_is_not_kept() -> None:
    # "1" has two tools named ":" once cleaned ("_"); one becomes "1___", and
    # "__"'s ":" becomes "_____": the own name of "1"'s ":::::" as well.
    tools, _ = build_tools(listed({"1": [":", ":::::"], "__": [":"]}), frozenset(), "auto", 1.0)
    names = {(tool.server, tool.tool.name): tool.name for tool in tools}
    assert names[("1", ":")] == "1___"
    assert names[("1", ":::::")] == "1_______"
    assert names[("__", ":")] == "_____"
