"""Comparing deterministic runs number by number, exclusions by name (scenarios.identity)."""

from __future__ import annotations

from harness.scenarios.identity import (
    NOT_DETERMINISTIC,
    compare_attempts,
    differing,
    excluded_reason,
    format_rows,
    summary_record,
)

FIRST = {"samples": 16, "core.0.x_nmi_total": 8, "core.0.x_nmi_max_ns": 1500}


def test_identical_runs_have_no_differing_number() -> None:
    rows = compare_attempts([FIRST, dict(FIRST)])
    assert [row.status for row in rows] == ["identical"] * 3
    assert differing(rows) == []


def test_one_changed_number_differs_and_is_named() -> None:
    rows = compare_attempts([FIRST, {**FIRST, "core.0.x_nmi_total": 9}])
    assert [(row.name, row.values) for row in differing(rows)] == [("core.0.x_nmi_total", (8, 9))]


def test_a_number_one_run_lacks_differs() -> None:
    rows = compare_attempts([FIRST, {k: v for k, v in FIRST.items() if k != "samples"}])
    assert [(row.name, row.values) for row in differing(rows)] == [("samples", (16, None))]


def test_excluded_names_match_the_counter_on_every_cpu_and_never_differ() -> None:
    not_deterministic = {"x_nmi_max_ns": "host time"}
    second = {**FIRST, "core.0.x_nmi_max_ns": 2500, "core.1.x_nmi_max_ns": 3}
    rows = compare_attempts([FIRST, second], not_deterministic)
    excluded = {row.name: row.reason for row in rows if row.status == "excluded"}
    assert excluded == {"core.0.x_nmi_max_ns": "host time", "core.1.x_nmi_max_ns": "host time"}
    assert differing(rows) == []


def test_exclusion_is_by_name_not_by_size_of_difference() -> None:
    rows = compare_attempts([FIRST, {**FIRST, "samples": 17}], {"x_nmi_max_ns": "host time"})
    assert [row.name for row in differing(rows)] == ["samples"]  # off by one still differs


def test_the_shipped_exclusions_each_carry_a_reason() -> None:
    assert all(reason.strip() for reason in NOT_DETERMINISTIC.values())
    assert excluded_reason("core.3.samples_nonexistent_name") is None


def test_table_and_summary_show_every_verdict() -> None:
    rows = compare_attempts([FIRST, {**FIRST, "samples": 17, "core.0.x_nmi_max_ns": 1}],
                            {"x_nmi_max_ns": "host time"})  # fmt: skip
    table = format_rows(rows, ("attempt 1", "attempt 2"))
    lines = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert lines["samples"].endswith("DIFFERS")
    assert lines["core.0.x_nmi_total"].endswith("identical")
    assert lines["core.0.x_nmi_max_ns"].endswith("excluded: host time")
    assert summary_record(rows) == {
        "numbers": 3, "identical": 1, "differing": {"samples": [16, 17]},
        "excluded": {"core.0.x_nmi_max_ns": "host time"},
    }  # fmt: skip
