"""The shared laws: each holds on equal numbers and names both sides when broken."""

from __future__ import annotations

from harness.agent.oracles import laws
from harness.agent.values.results import Violation


def test_equal_and_zero_hold_only_on_the_number() -> None:
    assert laws.equal("X", 0, "a", want=3, got=3, detail="") == []
    assert laws.equal("X", 0, "a", want=3, got=2, detail="d") == [
        Violation("X", 0, "a = 3", "2", "d")
    ]
    assert laws.zero("X", None, "b", got=0, detail="") == []
    assert laws.zero("X", None, "b", got=1, detail="") == [Violation("X", None, "b = 0", "b = 1")]


def test_bounds_are_inclusive() -> None:
    assert laws.at_most("X", 1, "n", bound=4, got=4, detail="") == []
    assert laws.at_most("X", 1, "n", bound=4, got=5, detail="")[0].expected == "n ≤ 4"
    assert laws.at_least("X", 1, "n", bound=4, got=4, detail="") == []
    assert laws.at_least("X", 1, "n", bound=4, got=3, detail="")[0].observed == "n = 3"


def test_sums_to_names_every_nonzero_term() -> None:
    assert laws.sums_to("X", 0, ("calls", 5), {"a": 2, "b": 3}, "") == []
    (broken,) = laws.sums_to("X", 0, ("calls", 6), {"a": 2, "b": 3, "c": 0}, "")
    assert (broken.expected, broken.observed) == ("calls = 6", "a 2 + b 3 = 5")
    (empty,) = laws.sums_to("X", 0, ("calls", 1), {"a": 0}, "")
    assert empty.observed == "every term 0 = 0"


def test_law_lists_report_each_broken_law_with_its_text() -> None:
    held, broken = laws.Law("a", 2, 2), laws.Law("b", 2, 3, want_text="x_fill 2")
    assert laws.all_equal("X", 0, (held, broken), "") == [
        Violation("X", 0, "b = x_fill 2", "b = 3")
    ]
    assert laws.all_at_most("X", 0, (held, broken), "")[0].expected == "b ≤ x_fill 2"
    assert laws.all_at_most("X", 0, (held, laws.Law("c", 5, 4)), "") == []
