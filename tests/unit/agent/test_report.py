"""What the flavours' reports share: the ``all`` row, nmi% and deliv%, matrix cells."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.agent.oracles.report import (
    CellRow,
    OverflowShares,
    SeedDefect,
    total_row,
    unjudged,
    verdict_lines,
)
from harness.agent.values.results import Judged, Violation


@dataclass(frozen=True, slots=True)
class Row(OverflowShares):
    cpu: int | None
    seen: int
    nmi_ok: int
    undelivered: int
    irq: int | None
    label: str


ROWS = (Row(0, 90, 90, 10, 90, "a"), Row(1, 10, 5, 0, None, "b"))


def test_the_all_row_sums_ints_and_keeps_what_it_is_given() -> None:
    total = total_row(Row, ROWS, label="all")
    assert total == Row(None, 100, 95, 10, None, "all")  # a CPU without irq: no irq sum
    assert (total.nmi_pct, total.delivered_pct) == (95.0, 90.9)


def test_a_field_with_no_sum_must_be_kept() -> None:
    with pytest.raises(TypeError, match=r"Row\.label"):
        total_row(Row, ROWS)


def test_no_overflow_has_no_shares() -> None:
    row = Row(0, 0, 0, 0, 0, "a")
    assert (row.nmi_pct, row.delivered_pct) == (None, None)


def test_a_cell_row_takes_the_core_counters_and_the_flavours_own() -> None:
    core = {"x_nmi_total": 8, "x_nmi_ctx_ok": 6, "x_periods_undelivered": 2}
    row = CellRow.from_core(3, core, irq=8, recorded=7, drops={"overflow": 1})
    assert row.as_dict() == {"cpu": 3, "irq": 8, "overflows": 8, "recorded": 7, "undelivered": 2,
                             "drops": {"overflow": 1}, "nmi_share": 0.75}  # fmt: skip
    assert CellRow.from_core(0, {}, irq=None, recorded=0, drops={}).nmi_share is None


ORACLES = (("HW-O4", "exact fill"), ("HW-O8", "stall independence"), ("HW-O9", "errnos"))
SEED = SeedDefect("HW-D2", frozenset({"HW-O8"}), may_fail=frozenset({"HW-O4"}))


def test_a_quirk_run_shows_its_defect_as_xfail_not_as_fail() -> None:
    violations = [
        Violation("HW-O8", 0, "restarts", "none"),
        Violation("HW-O4", 1, "stopped", "running"),
    ]
    lines = verdict_lines(violations, ORACLES, reproduces=SEED).splitlines()
    assert lines[0] == "XFAIL  HW-O4  exact fill  (HW-D2 reproduced, as the seed does)"
    assert lines[2] == "XFAIL  HW-O8  stall independence  (HW-D2 reproduced, as the seed does)"
    assert lines[4] == "PASS   HW-O9  errnos"
    assert SEED.problems(violations) == []


def test_a_quirk_run_whose_defect_did_not_show_is_the_failure() -> None:
    violations = [Violation("HW-O9", None, "EINVAL", "0")]
    lines = verdict_lines(violations, ORACLES, reproduces=SEED).splitlines()
    assert lines[0] == "PASS   HW-O4  exact fill"  # may fail, need not
    assert lines[1] == (
        "FAIL   HW-O8  stall independence  (HW-D2 did not show: the quirk run must reproduce it)"
    )
    assert lines[2] == "FAIL   HW-O9  errnos"
    assert SEED.problems(violations) == [
        "HW-O8 held: HW-D2 did not show",
        "HW-O9 failed: HW-D2 does not break it",
    ]


def test_without_a_quirk_the_verdicts_are_unchanged() -> None:
    lines = verdict_lines([Violation("HW-O8", 0, "1", "0")], ORACLES).splitlines()
    assert lines[:2] == ["PASS  HW-O4  exact fill", "FAIL  HW-O8  stall independence"]


def test_a_held_oracle_passes_only_on_what_it_compared() -> None:
    """PASS says how much it compared; n = 0 or no count at all is UNJUDGED, with why."""
    judged = [Judged("HW-O9", 8, "ops"), Judged("HW-O8", 0, "samples", why="none in the phase"),
              Judged("HW-O4", 12, "samples", part="text"),
              Judged("HW-O4", 0, "samples", why="one CPU", part="exclusive")]  # fmt: skip
    by_name = {line.split()[1]: line for line in verdict_lines([], ORACLES, judged=judged)
               .splitlines()}  # fmt: skip
    assert by_name["HW-O9"].startswith("PASS")
    assert "(n=8 ops)" in by_name["HW-O9"]
    assert by_name["HW-O8"].startswith("UNJUDGED")
    assert "none in the phase" in by_name["HW-O8"]
    assert by_name["HW-O4"].startswith("UNJUDGED")
    assert "text: n=12 samples; exclusive: 0 samples: one CPU" in by_name["HW-O4"]
    failed = verdict_lines([Violation("HW-O8", 0, "1", "0")], ORACLES, judged=judged)
    assert any(line.startswith("FAIL") and "HW-O8" in line for line in failed.splitlines())
    no_count = verdict_lines([], ORACLES, judged=judged[:1])
    assert "no count of what it compared" in no_count
    assert unjudged(judged, ("HW-O9",)) == []
    assert unjudged(judged, ("HW-O8", "HW-O1")) == [
        "HW-O8 UNJUDGED: 0 samples: none in the phase",
        "HW-O1 UNJUDGED: no count of what it compared",
    ]
