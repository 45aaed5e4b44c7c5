"""A pure function's results found again by its argument's identity (`memo.by_identity`)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.agent.oracles import memo


@dataclass(frozen=True, slots=True)
class Value:
    n: int


def test_the_same_object_is_computed_once_an_equal_one_again() -> None:
    calls: list[Value] = []

    @memo.by_identity
    def double(value: Value) -> int:
        calls.append(value)
        return 2 * value.n

    a, b = Value(1), Value(1)
    assert (double(a), double(a), double(b), double(a)) == (2, 2, 2, 2)
    assert [c is a for c in calls] == [True, False]


def test_only_the_last_arguments_are_kept() -> None:
    calls: list[int] = []

    @memo.by_identity
    def seen(value: Value) -> int:
        calls.append(value.n)
        return value.n

    values = [Value(n) for n in range(memo.KEEP + 1)]
    for value in values:
        seen(value)
    seen(values[-1])  # kept
    seen(values[0])  # pushed out by the later ones: computed again
    assert calls == [*range(memo.KEEP + 1), 0]
