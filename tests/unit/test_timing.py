"""Stage times: exclusive per stage, per test, and the budget `invoke test` prints."""

from __future__ import annotations

import time

import pytest

from harness import timing
from harness.timing import TimedTest, format_budget, since, stage, timed, totals


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "monotonic", fake)
    zero = {**dict.fromkeys(timing.STAGES, 0.0), **{timing.tally_key(n): 0.0 for n in timing.UNITS}}
    monkeypatch.setattr(timing, "_totals", zero)  # not the run's
    return fake


def test_an_inner_stage_counts_only_for_itself(clock: Clock) -> None:
    before = totals()
    with stage(timing.ANALYSIS):
        clock.now += 2  # host analysis
        with stage(timing.PERF):
            clock.now += 5  # the copy out of the guest, inside the analysis
        clock.now += 1  # analysis again
    assert since(before) == {timing.PERF: 5.0, timing.ANALYSIS: 3.0}


def test_the_witness_keeps_the_time_of_the_runs_inside_it(clock: Clock) -> None:
    before = totals()
    with stage(timing.RUNS):
        clock.now += 1  # a run before the witness
    with stage(timing.WITNESS):
        clock.now += 2  # attaching gdb
        with stage(timing.RUNS):
            clock.now += 7  # the witnessed run, every overflow a gdb stop
            with stage(timing.ANALYSIS):
                clock.now += 1
        clock.now += 0.5  # disarming
    with stage(timing.ANALYSIS):
        clock.now += 3  # judging, after the witness
    assert since(before) == {timing.RUNS: 1.0, timing.ANALYSIS: 3.0, timing.WITNESS: 10.5}


def test_a_timed_function_counts_every_call_even_a_failing_one(clock: Clock) -> None:
    @timed(timing.RUNS)
    def run(seconds: float) -> None:
        clock.now += seconds
        if seconds > 2:
            raise RuntimeError("the run failed")

    before = totals()
    run(1.5)
    with pytest.raises(RuntimeError):
        run(3)
    assert since(before) == {timing.RUNS: 4.5}


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown stage 'lunch'"), stage("lunch"):
        pass


def test_the_budget_sums_stages_names_the_rest_other_and_lists_the_slowest() -> None:
    tests = [TimedTest(f"t{i}", float(i), ((timing.RUNS, i / 2),)) for i in range(1, 8)]
    tests.append(TimedTest("slow", 40.0, ((timing.BOOT, 2.0), (timing.PERF, 30.0))))
    lines = format_budget(tests, slowest=3)
    assert lines[0] == "8 tests, 68.0 s of test time"
    assert "  perf               30.0 s   44.1 %" in lines
    assert "  runs               14.0 s   20.6 %" in lines
    assert "  other              22.0 s   32.4 %" in lines  # 68 - 2 - 30 - 14
    assert lines[-4:] == [
        "slowest 3:",
        "     40.0 s  slow  (boot/restore 2.0, perf 30.0)",
        "      7.0 s  t7  (runs 3.5)",
        "      6.0 s  t6  (runs 3.0)",
    ]


def test_no_tests_no_budget() -> None:
    assert format_budget([]) == []


def test_the_witness_is_also_given_per_1000_overflows_it_saw() -> None:
    key = timing.tally_key(timing.WITNESS)
    tests = [TimedTest("a", 10.0, ((timing.WITNESS, 6.0), (key, 40.0))),
             TimedTest("b", 8.0, ((timing.WITNESS, 3.0), (key, 20.0)))]  # fmt: skip
    lines = format_budget(tests)
    assert "  witness             9.0 s   50.0 %  (150.0 s per 1000 overflows: 60)" in lines
    assert "     10.0 s  a  (witness 6.0)" in lines  # the count is no stage of the test's


def test_a_tally_is_counted_since_like_a_stage_and_only_for_a_stage_with_a_unit(
    clock: Clock,
) -> None:
    before = totals()
    timing.tally(timing.WITNESS, 48)
    assert since(before) == {timing.tally_key(timing.WITNESS): 48}
    with pytest.raises(ValueError, match="counts nothing"):
        timing.tally(timing.RUNS, 1)
