"""What ``invoke repro`` prints: each attempt's verdicts, the numbers across attempts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.agent.values.results import Judged, Violation
from harness.cli.texts import (
    deterministic_failed,
    format_across,
    format_deterministic,
    format_verdicts,
)
from harness.scenarios.deterministic import DeterministicResult
from harness.scenarios.identity import NumberRow
from harness.scenarios.repro import ReproResult, Verdict
from harness.scenarios.witnessing import WitnessReport

HELD, FAILED = Verdict("IRQ holds", True, "3"), Verdict("lost < 2", False, "5")


def test_verdicts_are_one_a_line_then_the_tally(tmp_path: Path) -> None:
    result = ReproResult(tmp_path, 2, 1, ((HELD,), (HELD, FAILED)))
    assert format_verdicts(result).splitlines() == [
        "attempt 1: held   IRQ holds (observed 3)",
        "attempt 2: held   IRQ holds (observed 3)",
        "attempt 2: FAILED lost < 2 (observed 5)",
        f"reproduced in 1 of 2 attempt(s); bundle: {tmp_path}",
    ]


def test_the_numbers_across_attempts_name_at_most_eight(tmp_path: Path) -> None:
    across = {"identical": 5, "numbers": 16, "differing": [f"n{i}" for i in range(11)]}
    (tmp_path / "bundle.json").write_text(json.dumps({"across_attempts": across}))
    assert format_across(ReproResult(tmp_path, 1, 1, ())) is None
    text = format_across(ReproResult(tmp_path, 2, 2, ()))
    assert text == ("numbers identical across attempts: 5 of 16; differing: n0, n1, n2, n3, "
                    "n4, n5, n6, n7 and 3 more (all in bundle.json)")  # fmt: skip


def test_a_deterministic_run_fails_on_a_differing_number(tmp_path: Path) -> None:
    rows = (NumberRow("a", (1, 1), "identical"), NumberRow("b", (1, 2), "differs"))
    outcome = DeterministicResult(ReproResult(tmp_path, 2, 2, ()), rows, ("1", "2"), (1.0, 2.0))
    assert deterministic_failed(outcome)
    assert format_deterministic(outcome).splitlines()[-1] == (
        "numbers identical: 1 of 2; differing: 1; excluded by name: 0"
    )
    same = DeterministicResult(outcome.repro, rows[:1], ("1", "2"), (1.0, 2.0))
    assert not deterministic_failed(same)


def test_a_witnessed_deterministic_run_says_what_the_witness_saw_and_fails_on_it(
    tmp_path: Path,
) -> None:  # fmt: skip
    rows = (NumberRow("witness.0.overflows", (5, 5), "identical"),)
    held = WitnessReport({0: 5}, {0: 5}, None, (), (Judged("WITNESS", 5, "x", part="counts"),),
                         (), None, "PMU sampling off", 5, 0)  # fmt: skip
    caught = replace(held, violations=(Violation("WITNESS", 0, "6", "7", "counts"),))
    outcome = DeterministicResult(ReproResult(tmp_path, 2, 2, ()), rows, ("1", "2"), (1.0, 2.0),
                                  witnessed=(held, held), witness_logs_identical=True)  # fmt: skip
    text = format_deterministic(outcome)
    assert "attempt 1: witness: PASS: overflows witnessed CPU 0 5; compared counts 5" in text
    assert "witness logs across attempts: identical" in text
    assert not deterministic_failed(outcome)
    assert deterministic_failed(replace(outcome, witnessed=(held, caught)))
    assert deterministic_failed(replace(outcome, witness_logs_identical=False))
