"""When a witnessed run is made again (harness.agent.witnessed.again): missing evidence only."""

from __future__ import annotations

from typing import Any

import pytest

from harness.agent.values.results import Judged, Violation
from harness.agent.witnessed import ATTEMPTS, Witnessed, again


def _done(truth_n: int, violations: int = 0) -> Witnessed:
    text = "overflows in the workloads' text"
    judged = (Judged("WITNESS", 40, "samples paired"),
              Judged("WITNESS", truth_n, text, part="truth"))  # fmt: skip
    wrong = tuple(Violation("WITNESS", 0, "pc 1", "pc 2") for _ in range(violations))
    fields: dict[str, Any] = {"run": None, "verdict": None, "report": "", "armed_s": 1.0}
    return Witnessed(violations=wrong, judged=judged, **fields)


def test_a_run_whose_truth_part_compared_nothing_is_made_again() -> None:
    assert again(_done(truth_n=0), attempt=1)
    assert again(_done(truth_n=0), attempt=ATTEMPTS - 1)


@pytest.mark.parametrize(
    ("truth_n", "violations", "attempt"),
    [(5, 0, 1), (0, 1, 1), (0, 0, ATTEMPTS)],
    ids=["evidence", "a violation is a verdict", "attempts used up"],
)
def test_otherwise_the_run_stands(truth_n: int, violations: int, attempt: int) -> None:
    assert not again(_done(truth_n, violations), attempt=attempt)
