"""The gateway's ids (``toolrelay.io.ids``): unique within a process and across forks."""

from __future__ import annotations

import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.ids import _first, unique_hex


def test_ids_are_unique_hex_of_uuid_length() -> None:
    ids = [unique_hex() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_ids_count_up_by_one_across_their_batches() -> None:
    """Made 256 at a time, returned in counting order: each the one before plus one."""
    numbers = [int(unique_hex(), 16) for _ in range(1_000)]
    assert numbers == list(range(numbers[0], numbers[0] + 1_000))


def test_a_forked_child_draws_its_own_prefix() -> None:
    unique_hex()  # the parent's batch begun: the child must not go on with it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out without running anything else
        os.write(write, unique_hex().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 32
    assert child[:12] != unique_hex()[:12]


@settings(max_examples=500)
@given(st.text(alphabet="0123456789abcdef", min_size=12, max_size=12), st.integers(0, 2**80 - 1))
def test_an_id_is_the_prefix_then_the_count_in_20_digits(prefix: str, count: int) -> None:
    """The one number's hex is what formatting the prefix and the count gives."""
    assert hex(_first(prefix) + count)[3:] == f"{prefix}{count:020x}"
