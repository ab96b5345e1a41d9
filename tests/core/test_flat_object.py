"""``FlatObject``'s fast lanes (a fragment wholly inside a string, a plain string run
found with string methods, whitespace looked for with a character test) give, fragment
for fragment, the output and the state of the regular expressions they skip
(``fast_lanes`` off), for generated JSON written compact and spaced, with escapes,
unicode, nested values and sloppy text, cut anywhere; and a flat object read to its
end is, decoded, the object it was written from."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.flatjson import FlatObject


class _Expressions(FlatObject):
    """Every fragment read by the regular expressions alone."""

    __slots__ = ()
    fast_lanes = False


def _state(flat: FlatObject) -> tuple[Any, ...]:
    return (flat._phase, flat._held, flat._key, flat._tail, flat.done)


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({cut % (len(text) + 1) for cut in cuts} - {0, len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _read_both(fragments: list[str]) -> list[str | None]:
    """Each fragment's output, the same with and without the fast lanes (and the
    same state after it), up to the first the object says no to."""
    fast, slow = FlatObject(), _Expressions()
    outputs: list[str | None] = []
    for fragment in fragments:
        out = fast.feed(fragment)
        assert out == slow.feed(fragment), fragment
        outputs.append(out)
        if out is None:
            break  # the caller hands the call to the lenient reader: no state to compare
        assert _state(fast) == _state(slow), fragment
    return outputs


# Characters that end, escape or break a string, printable and not, and whitespace.
_CHARS = [*'ab é"\\/\n\t\r \x01\x1f\u00a0\u2028\u200b{}[]:,', "\ud800", "😀", "\\u0041"]
_STRINGS = st.lists(st.sampled_from(_CHARS), max_size=10).map("".join)
_SCALARS = st.one_of(
    _STRINGS,
    st.integers(-(10**25), 10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_VALUES = json_trees(
    _SCALARS,
    _STRINGS,
    leaves=5,
)
_FLAT = st.dictionaries(_STRINGS, _SCALARS, max_size=5)
_ANY = st.dictionaries(_STRINGS, _VALUES, max_size=4)


def _written(value: dict[str, Any], style: int) -> str:
    if style == 0:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # compact
    if style == 1:
        return json.dumps(value)  # a space after each colon and comma, \\u escapes
    if style == 2:
        return json.dumps(value, ensure_ascii=False, indent=1)  # newlines and indents
    return json.dumps(value, ensure_ascii=False, indent="\t ", separators=(" ,", " : "))


_CUTS = st.lists(st.integers(0, 200), max_size=12)


@settings(max_examples=500)
@given(value=_ANY, style=st.integers(0, 3), cuts=_CUTS)
def test_written_objects_read_alike_with_and_without_the_fast_lanes(
    value: dict[str, Any], style: int, cuts: list[int]
) -> None:
    _read_both(_pieces(_written(value, style), cuts))


@settings(max_examples=500)
@given(value=_FLAT, style=st.integers(0, 3), cuts=_CUTS)
def test_a_flat_object_read_to_its_end_is_the_object_written(
    value: dict[str, Any], style: int, cuts: list[int]
) -> None:
    text = _written(value, style)
    outputs = _read_both(_pieces(text, cuts))
    if None not in outputs:
        assert json.loads("".join(o for o in outputs if o is not None)) == json.loads(text)


@settings(max_examples=500)
@given(
    texts=st.lists(st.lists(st.sampled_from([*_CHARS, '"k"', "1", "true"])).map("".join)),
    opened=st.booleans(),
)
def test_any_text_reads_alike_with_and_without_the_fast_lanes(
    texts: list[str], opened: bool
) -> None:
    # Opened inside a string value or a key, a fragment may go by the whole-fragment lane.
    _read_both(['{"k":"' if opened else '{"', *texts])


# Where the object may stand when a fragment comes: before it, in or after a key, after
# its colon, in or after a value, held in an atom, closed.
_STANDINGS = ["", "{", '{"', '{"k', '{"k"', '{"k":', '{"k":"v', '{"k":"v"', '{"k":1']
_STANDINGS += ['{"k":1,', "{}"]
# Structure and plain strings, printable without an escape: what the compact lane reads,
# in orders JSON allows and does not.
_STRUCTURE = st.lists(st.sampled_from(["{", "}", ":", ",", '"', "k", "é 1", "1", "[", " "]))


@settings(max_examples=1000)
@given(
    standing=st.sampled_from(_STANDINGS),
    texts=st.lists(_STRUCTURE.map("".join), max_size=6),
)
def test_structure_reads_alike_with_and_without_the_fast_lanes(
    standing: str, texts: list[str]
) -> None:
    # (The compact lane reads a plain fragment's strings and structure at once.)
    _read_both([standing, *texts] if standing else texts)


def test_a_fragment_inside_a_string_is_its_own_output() -> None:
    flat = FlatObject()
    assert flat.feed('{"ci') == "{"
    assert flat.feed("ty") == ""  # a key waits for its value
    assert flat.feed('":"Par') == '"city":"Par'
    assert flat.feed("is in France") == "is in France"
    assert flat.feed('"}') == '"}'
    assert flat.done
