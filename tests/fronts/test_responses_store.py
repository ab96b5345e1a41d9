"""The in-memory response store (``ResponseStore``) keeps the newest ``capacity``
responses, a response kept again counting as new: held to a reference model of
that rule for generated sequences of puts, gets and deletes; what it keeps is a
copy."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.server.responses.store import ResponseStore

IDS = st.sampled_from(["resp_a", "resp_b", "resp_c", "resp_d"])
# Puts three times in five: a response kept again once the store is full is the case to see.
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["put", "put", "put", "get", "delete"]), IDS, st.integers(0, 9)),
    max_size=20,
)


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 3), OPERATIONS)
def test_the_store_keeps_the_newest(capacity: int, operations: list[tuple[str, str, int]]) -> None:
    store = ResponseStore(capacity)
    model: OrderedDict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = OrderedDict()
    for operation, response_id, turn in operations:
        if operation == "put":
            output = [{"type": "message", "turn": turn}]
            response = {"id": response_id, "turn": turn, "output": output}
            history = [{"role": "user", "content": str(turn)}]
            store.put(response, history)
            if capacity > 0:
                model[response_id] = ((history, output), response)
                model.move_to_end(response_id)
                while len(model) > capacity:
                    model.popitem(last=False)
        elif operation == "delete":
            assert store.delete(response_id) == (model.pop(response_id, None) is not None)
        entry = model.get(response_id)
        assert store.get(response_id) == (entry and entry[0])
        assert store.response(response_id) == (entry and entry[1])
    for response_id in ("resp_a", "resp_b", "resp_c", "resp_d"):
        assert store.get(response_id) == (model[response_id][0] if response_id in model else None)


def test_a_kept_response_is_a_copy_no_later_change_reaches() -> None:
    """What a follow-up reads is what was put: the store keeps the JSON, so a
    request that changes its history or response afterwards (or a follow-up that
    changes what it read) changes nothing kept."""
    store = ResponseStore(4)
    output = [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]
    response = {"id": "resp_a", "output": output}
    history = [{"role": "user", "content": "hello"}]
    store.put(response, history)
    history.append({"role": "user", "content": "later"})
    output[0]["content"] = []
    response["status"] = "changed"
    read = store.get("resp_a")
    assert read == (
        [{"role": "user", "content": "hello"}],
        [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
    )
    assert read is not None
    read[0].clear()
    again = store.get("resp_a")
    assert again is not None and again[0] == [{"role": "user", "content": "hello"}]
    assert store.response("resp_a") == {
        "id": "resp_a",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
    }
