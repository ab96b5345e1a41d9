"""Where a read's first events end (``_after_events``, the bytes a stream's plain
frame is learned from) against the definition it replaced: a split at the
events' ends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.io.backends.http import _after_events


def _by_split(data: bytes, count: int) -> int:
    parts = data.split(b"\n\n", count)
    return len(data) - len(parts[-1]) if len(parts) > count else len(data)


@given(
    data=st.lists(st.sampled_from([b"\n", b"\n\n", b"\n\n\n", b"data: x", b"", b"\r"])).map(
        b"".join
    ),
    count=st.integers(0, 5),
)
def test_the_events_end_where_a_split_cuts_them(data: bytes, count: int) -> None:
    assert _after_events(data, count) == _by_split(data, count)
