"""Progress lines of long steps: fraction, percentage, time left, and what the total rests on."""

from __future__ import annotations

import pytest

from harness.progress import (
    Progress,
    format_duration,
    format_progress,
    remaining_s,
    report_now,
    report_points,
)


def test_the_time_left_is_the_pace_so_far_times_the_steps_left() -> None:
    assert remaining_s(Progress(done=200, total=800, elapsed_s=100.0)) == pytest.approx(300.0)
    assert remaining_s(Progress(done=799, total=800, elapsed_s=799.0)) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "progress",
    [
        Progress(done=0, total=800, elapsed_s=30.0),  # nothing to take a pace from
        Progress(done=10, total=None, elapsed_s=30.0),  # no total
        Progress(done=800, total=800, elapsed_s=30.0),  # done
        Progress(done=900, total=800, elapsed_s=30.0),  # the estimate was low
        Progress(done=1, total=5, elapsed_s=30.0, expected_s=20.0),  # slower than last time
    ],
)
def test_no_time_left_is_claimed_when_it_cannot_be_known(progress: Progress) -> None:
    assert remaining_s(progress) is None


def test_an_expected_duration_counts_down_whatever_the_units() -> None:
    progress = Progress(done=1, total=5, elapsed_s=4.0, expected_s=11.0)
    assert remaining_s(progress) == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4, "0 s"), (44.6, "45 s"), (60, "1 min 0 s"), (281, "4 min 41 s"), (3720, "1 h 02 min")],
)
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("progress", "line"),
    [
        (Progress(412, 828, 95.0, basis="count of the previous arm64 default build"),
         "412/828 steps (49%), about 1 min 36 s left (count of the previous arm64 default build)"),
        (Progress(0, 828, 5.0, basis="estimate: a typical arm64 default build's count"),
         "0/828 steps (0%), no estimate yet (estimate: a typical arm64 default build's count)"),
        (Progress(900, 828, 500.0, basis="estimate: x"),
         "900 steps, more than the 828 expected (estimate: x): no estimate"),
        (Progress(828, 828, 500.0), "828/828 steps (100%)"),
        (Progress(17, None, 20.0), "17 steps"),
        (Progress(2, 5, 4.0, unit="stages", expected_s=11.0, basis="time of the previous build"),
         "2/5 stages (40%), about 7 s left (time of the previous build)"),
        (Progress(2, 5, 14.0, unit="stages", expected_s=11.0),
         "2/5 stages (40%), longer than the 11 s expected"),
    ],
)  # fmt: skip
def test_the_line_shows_fraction_percentage_time_left_and_basis(
    progress: Progress, line: str
) -> None:
    assert format_progress(progress) == line


@pytest.mark.parametrize(
    ("total", "points"),
    [
        (40, {4, 8, 12, 16, 20, 24, 28, 32, 36}),
        (12, set(range(1, 12))),
        (1, set()),
        (0, set()),
    ],
)
def test_a_run_reports_about_every_tenth_and_not_at_its_end(total: int, points: set[int]) -> None:
    assert report_points(total) == points


def test_short_runs_say_nothing() -> None:
    assert not report_now(4, 40, elapsed_s=10.0)
    assert report_now(4, 40, elapsed_s=61.0)
    assert not report_now(5, 40, elapsed_s=61.0)
