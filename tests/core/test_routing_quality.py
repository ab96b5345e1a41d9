"""Quality routing's window (toolrelay.routing_quality): bounded, relative, thresholded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.routing_quality import FLOOR, MARGIN, MIN_ROUNDS, WINDOW, QualityWindow


def _fill(window: QualityWindow, name: str, bad: int, good: int) -> None:
    for _ in range(bad):
        window.record(name, True)
    for _ in range(good):
        window.record(name, False)


def test_a_backend_much_worse_than_its_peers_gets_a_bounded_cut() -> None:
    window = QualityWindow()
    _fill(window, "bad", 40, 0)
    _fill(window, "a", 1, 39)
    _fill(window, "b", 0, 40)
    verdicts = window.verdicts(["bad", "a", "b"])
    assert verdicts["bad"].factor == FLOOR
    assert verdicts["a"].factor == verdicts["b"].factor == 1.0
    assert "100% of its last 40 rounds" in verdicts["bad"].reason()


def test_nothing_is_judged_before_enough_rounds() -> None:
    window = QualityWindow()
    _fill(window, "bad", MIN_ROUNDS - 1, 0)
    _fill(window, "good", 0, 100)
    assert window.verdicts(["bad", "good"])["bad"].factor == 1.0


def test_the_window_forgets_old_rounds() -> None:
    window = QualityWindow()
    _fill(window, "x", WINDOW, 0)
    _fill(window, "x", 0, WINDOW)
    _fill(window, "y", 0, WINDOW)
    assert window.verdicts(["x", "y"])["x"].rate == 0.0


@given(st.lists(st.tuples(st.integers(0, 150), st.integers(0, 150)), min_size=1, max_size=5))
def test_factors_are_bounded_and_only_cut_beyond_the_margin(tallies: list[tuple[int, int]]) -> None:
    window = QualityWindow()
    names = [f"b{i}" for i in range(len(tallies))]
    for name, (bad, good) in zip(names, tallies, strict=True):
        _fill(window, name, bad, good)
    for verdict in window.verdicts(names).values():
        assert FLOOR <= verdict.factor <= 1.0
        if verdict.factor < 1.0:
            assert verdict.rounds >= MIN_ROUNDS
            assert verdict.rate - verdict.peers_rate > MARGIN
