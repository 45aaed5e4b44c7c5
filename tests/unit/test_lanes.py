"""Lanes: forked jobs side by side, results in order, failures raised, nothing left running."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import lanes
from harness.errors import InfraError


def test_results_come_back_in_job_order() -> None:
    def job(value: int, delay: float) -> Callable[[], tuple[int, int]]:
        def run() -> tuple[int, int]:
            time.sleep(delay)  # the first job ends last
            return value, os.getpid()

        return run

    found = lanes.run_lanes([job(1, 0.3), job(2, 0.0)])
    assert [value for value, _ in found] == [1, 2]
    assert len({pid for _, pid in found} | {os.getpid()}) == 3  # each in a child of its own


def test_a_failing_job_is_an_infra_error_with_its_traceback() -> None:
    def broken() -> None:
        raise ValueError("lane broke here")

    with pytest.raises(InfraError, match=r"lane 1 failed:(.|\n)*lane broke here"):
        lanes.run_lanes([lambda: 1, broken])


def test_a_child_that_dies_without_a_result_is_named() -> None:
    with pytest.raises(InfraError, match="lane 0 ended with exit status 7 and sent no result"):
        lanes.run_lanes([lambda: os._exit(7), lambda: 2])


def test_one_failure_stops_the_lanes_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sleeper gets SIGTERM (a `Terminated` in its main thread) and runs its finally."""
    monkeypatch.setattr(lanes, "STOP_WAIT_S", 10.0)
    marker = tmp_path / "stopped"

    def sleeper() -> None:
        try:
            time.sleep(60)
        except KeyboardInterrupt:  # harness.process.Terminated
            marker.write_text("terminated")
            raise

    def broken() -> None:
        time.sleep(0.5)  # the sleeper has started and installed its handler
        raise RuntimeError("second lane")

    with pytest.raises(InfraError, match="second lane"):
        lanes.run_lanes([sleeper, broken])
    assert marker.read_text() == "terminated"


def test_a_single_job_runs_here() -> None:
    assert lanes.run_lanes([os.getpid]) == [os.getpid()]
