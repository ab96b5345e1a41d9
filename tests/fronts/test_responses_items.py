"""The Responses front reads the usual input items (a message of text, a plain
``function_call`` of string fields, its ``function_call_output`` as text) in one
loop, and any other item through ``_item``, which names where it stands. Held
here to ``_item`` for every item, for generated item lists of every kind the
reader takes or refuses: the same messages, or the same error (its text, its
field, its status)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.test_responses_read import (
    CALL,
    CUSTOM_CALL,
    JUNK,
    MESSAGE,
    OTHER_ITEMS,
    OUTPUT,
    TEXT,
    or_wrong,
)
from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import _item, input_messages

# A call of any namespace a client may send, empty and wrong ones among them.
NAMESPACED_CALL = st.fixed_dictionaries(
    {
        "type": st.just("function_call"),
        "call_id": or_wrong(st.sampled_from(["c0", "c1"])),
        "name": or_wrong(st.sampled_from(["f", "g"])),
        "namespace": st.sampled_from(["mcp", "functions", "", None, 1, False, ["x"]]),
    },
    optional={"arguments": or_wrong(st.sampled_from(['{"a": 1}', "", None]))},
)
# A message with any role, content or type a client may send.
ODD_MESSAGE = st.fixed_dictionaries(
    {"role": JUNK | st.sampled_from(["user", "assistant", "tool"])},
    optional={"type": st.just("message"), "content": or_wrong(TEXT)},
)
ITEMS = st.lists(
    MESSAGE | CALL | NAMESPACED_CALL | OUTPUT | CUSTOM_CALL | OTHER_ITEMS | ODD_MESSAGE | JUNK,
    max_size=6,
)


def general(items: list[Any], where: str) -> list[dict[str, Any]]:
    """``input_messages`` with every item read through ``_item``."""
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        _item(item, f"{where}[{i}]", out)
    return out


def outcome(read: Any, items: list[Any], where: str) -> Any:
    try:
        return read(items, where)
    except APIError as error:
        return ("error", error.status, error.message, error.param, error.code)


@settings(max_examples=1000, deadline=None)
@given(ITEMS, st.sampled_from(["input", "output"]))
def test_input_items_read_as_each_through_the_general_reader(items: list[Any], where: str) -> None:
    assert outcome(input_messages, items, where) == outcome(general, items, where)
