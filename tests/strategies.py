"""Hypothesis strategies more than one test module draws from."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_trees(
    scalars: st.SearchStrategy[Any],
    keys: st.SearchStrategy[str],
    *,
    leaves: int,
    width: int = 3,
    object_width: int | None = 3,
) -> st.SearchStrategy[Any]:
    """JSON-shaped values: `scalars` at the leaves, arrays and objects (keyed by `keys`) above.

    Each module picks its own scalars and keys (the numbers, strings and escapes its code path
    must survive); the tree around them is the same everywhere. `object_width=None` leaves an
    object's size to `leaves` alone.
    """
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=width) | st.dictionaries(keys, inner, max_size=object_width)
        ),
        max_leaves=leaves,
    )
