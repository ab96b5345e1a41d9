"""The balancing policy (toolrelay.balance): weights, load, stickiness, health."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.balance import Backoff, Member, affinity_of_messages, failed, pick, succeeded
from toolrelay.io.backends import Backend
from toolrelay.io.backends.pool import Fleet
from toolrelay.io.settings import BackendConfig, Settings

weights = st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=6)


def _members(ws: list[float]) -> list[Member]:
    return [Member(f"b{i}", w) for i, w in enumerate(ws)]


@given(weights, st.integers(min_value=1, max_value=300))
def test_sequential_traffic_splits_by_weight_within_a_request_or_so(
    ws: list[float], n: int
) -> None:
    members = _members(ws)
    served = Counter(pick(members, 0.0) for _ in range(n))
    total = sum(ws)
    for i, weight in enumerate(ws):
        assert abs(served[i] - n * weight / total) < len(ws)


@given(weights, st.lists(st.floats(min_value=0.1, max_value=1.0), min_size=6, max_size=6))
def test_a_change_of_weight_takes_effect_at_once(ws: list[float], factors: list[float]) -> None:
    members = _members(ws)
    for _ in range(200):  # a long history under the old weights
        pick(members, 0.0)
    factors = factors[: len(ws)]
    served = Counter(pick(members, 0.0, factors=factors) for _ in range(100))
    scaled = [w * f for w, f in zip(ws, factors, strict=True)]
    for i, weight in enumerate(scaled):
        assert abs(served[i] - 100 * weight / sum(scaled)) < 2 * len(ws)


@given(weights, st.data())
def test_requests_in_flight_divide_a_members_share(ws: list[float], data: st.DataObject) -> None:
    members = _members(ws)
    for member in members:
        member.outstanding = data.draw(st.integers(min_value=0, max_value=20))
    served = Counter(pick(members, 0.0) for _ in range(200))
    loaded = [m.weight / (m.outstanding + 1) for m in members]
    for i, share in enumerate(loaded):
        assert abs(served[i] - 200 * share / sum(loaded)) < len(ws)


def test_an_idle_member_is_preferred_to_a_busy_one_of_the_same_weight() -> None:
    members = _members([1.0, 1.0])
    members[0].outstanding = 3
    assert Counter(pick(members, 0.0) for _ in range(100)) == {1: 80, 0: 20}


@given(
    weights,
    st.data(),
    st.one_of(st.none(), st.text(max_size=20)),
    st.floats(min_value=0.0, max_value=1000.0),
)
def test_never_picks_a_member_that_is_out_while_one_is_in(
    ws: list[float], data: st.DataObject, affinity: str | None, now: float
) -> None:
    members = _members(ws)
    for member in members:
        member.out_until = data.draw(st.sampled_from([0.0, now - 1, now + 5, now + 100]))
        member.outstanding = data.draw(st.integers(min_value=0, max_value=5))
    chosen = members[pick(members, now, affinity)]
    if any(not m.is_out(now) for m in members):
        assert not chosen.is_out(now)
    else:  # all out: the one back first
        assert chosen.out_until == min(m.out_until for m in members)


@given(st.text(min_size=1, max_size=30), weights)
def test_an_affinity_key_stays_on_its_member_until_it_is_out(key: str, ws: list[float]) -> None:
    members = _members(ws)
    first = pick(members, 0.0, key)
    # Load does not move a sticky conversation.
    for member in members:
        member.outstanding += 3
    members[first].outstanding += 50
    assert pick(members, 0.0, key) == first
    if len(members) > 1:
        members[first].out_until = 10.0
        moved = pick(members, 0.0, key)
        assert moved != first
        # Only the conversations of the member that is out move.
        members[first].out_until = 0.0
        assert pick(members, 0.0, key) == first


def test_affinity_keys_spread_by_weight() -> None:
    members = _members([1.0, 2.0, 1.0])
    shares = Counter(pick(members, 0.0, f"conversation {i}") for i in range(4000))
    assert abs(shares[1] / 4000 - 0.5) < 0.04
    assert abs(shares[0] / 4000 - 0.25) < 0.04


def test_the_affinity_of_a_conversation_is_its_first_messages() -> None:
    head = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert affinity_of_messages(head) == affinity_of_messages(
        [*head, {"role": "assistant", "content": "hello"}]
    )
    assert affinity_of_messages(head) != affinity_of_messages(head[:1])


@given(
    st.integers(min_value=1, max_value=4),
    st.floats(min_value=0.5, max_value=5),
    st.integers(min_value=1, max_value=12),
)
def test_failures_take_a_member_out_for_a_doubling_bounded_backoff(
    threshold: int, first: float, n: int
) -> None:
    backoff = Backoff(threshold, first, 30.0)
    member = Member("b")
    periods = []
    for i in range(n):
        went_out = failed(member, 0.0, backoff)
        assert went_out == (i + 1 == threshold)
        assert member.is_out(0.0) == (i + 1 >= threshold)
        if member.is_out(0.0):
            periods.append(member.out_until)
    assert periods == sorted(periods)
    assert all(first <= p <= max(30.0, first) for p in periods)
    assert all(b in (a, 2 * a, 30.0) for a, b in pairwise(periods))
    assert succeeded(member)
    assert not member.is_out(0.0) and member.failures == 0
    assert not succeeded(member)


@given(
    st.integers(min_value=-2, max_value=8),
    st.one_of(st.just(0.0), st.floats(allow_nan=False, min_value=-10.0, max_value=1e10)),
)
def test_a_fleets_success_resets_and_tells_as_balances_does(
    failures: int, out_until: float
) -> None:
    """Fleet.succeeded skips balance.succeeded where nothing is to reset: the member
    ends as balance leaves it, and the listeners hear of it when balance says so."""
    url = "http://127.0.0.1:9/v1"
    backend = Backend(BackendConfig(url=url, kind="openai"))
    fleet = Fleet([backend], Settings(backend=url, backend_kind="openai"))
    told: list[str] = []
    fleet.listeners.append(lambda changed, _: told.append(changed.name))
    member = fleet.members[backend.name]
    member.failures, member.out_until = failures, out_until
    expected = Member(member.name, member.weight, failures=failures, out_until=out_until)
    changed = succeeded(expected)
    fleet.succeeded(backend)
    assert (member.failures, member.out_until) == (expected.failures, expected.out_until)
    assert told == ([backend.name] if changed else [])
