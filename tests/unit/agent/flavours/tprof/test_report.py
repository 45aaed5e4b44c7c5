from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.agent.flavours.tprof.oracles import TPROF_ORACLES, applicable_oracles, check_tprof
from harness.agent.flavours.tprof.report import (
    cpu_rows,
    drop_columns,
    format_cpu_table,
    format_verdicts,
    nmi_mode,
    summary,
    total_row,
)
from harness.agent.oracles.report import format_cpus
from harness.agent.values.results import Violation
from tests.unit.agent.flavours.tprof.test_oracles import (
    BASE,
    broken,
    consistent_run,
    tp_d1_run,
)

CONSISTENT_TABLE = """\
tprof: event cycles, period 1000000, S 100, drain manual (3 kicks), quirks 0x0, online CPUs 0-1
NMI on (PMU overflows as NMIs): 400 of 400 producer calls in NMI
cpu  irq  seen  perf  calls  recorded  overflow  dropbuf_sample  not_running  undeliv  deliv%  throttled   nmi%  irqoff  probe  mean_us  max_us
  0  240   240     -    240       200        40               0            0        0   100.0          0  100.0      12    0/0      3.0     8.0
  1  160   160     -    160       150         6               0            4        2    98.8          0  100.0       9    5/3      3.0    12.0
all  400   400     -    400       350        46               0            4        2    99.5          0  100.0      21    5/3      3.0    12.0"""  # noqa: E501


def columns(table: str) -> list[list[str]]:
    """The table's rows (after the two header lines), split into cells."""
    return [line.split() for line in table.splitlines()[2:]]


def test_table_of_the_consistent_run() -> None:
    assert format_cpu_table(BASE) == CONSISTENT_TABLE


def test_table_rows_are_aligned() -> None:
    assert len({len(line) for line in CONSISTENT_TABLE.splitlines()[2:]}) == 1


@pytest.mark.parametrize(
    ("quirk", "lost_column"), [(True, "quirk_lost"), (False, "overflow_dropbuf")]
)
def test_table_shows_the_drop_causes_that_occurred(quirk: bool, lost_column: str) -> None:
    table = format_cpu_table(tp_d1_run(quirk=quirk))
    assert f"S 8, drain manual (4 kicks), quirks {0x1 if quirk else 0:#x}, online CPUs 0" in table
    assert columns(table) == [
        [
            *("cpu", "irq", "seen", "perf", "calls", "recorded", "overflow", "dropbuf_sample"),
            *(lost_column, "undeliv", "deliv%", "throttled", "nmi%", "irqoff", "probe"),
            *("mean_us", "max_us"),
        ],
        ["0", "30", "30", "-", "48", "16", "8", "16", "8", "0", "100.0", "0", "100.0", "0",
         "0/0", "3.0", "20.0"],
        ["all", "30", "30", "-", "48", "16", "8", "16", "8", "0", "100.0", "0", "100.0", "0",
         "0/0", "3.0", "20.0"],
    ]  # fmt: skip


def test_table_with_pseudo_nmi_off() -> None:
    table = format_cpu_table(consistent_run(nmi=False))
    assert table.splitlines()[1].startswith("NMI off (pseudo-NMI off, or a software clock)")
    assert columns(table)[2] == [
        "1", "160", "160", "-", "160", "150", "6", "0", "4", "2", "98.8", "0", "0.0", "0",
        "0/3", "3.0", "12.0",
    ]  # fmt: skip


def test_table_of_a_cpu_without_overflows() -> None:
    run = broken(BASE, core={1: {"x_nmi_total": 0, "x_nmi_sum_ns": 0, "x_nmi_max_ns": 0}})
    assert columns(format_cpu_table(run))[2] == [
        "1", "160", "0", "-", "160", "150", "6", "0", "4", "2", "0.0", "0", "-", "9", "5/3", "-",
        "0.0",
    ]  # fmt: skip


def test_table_reports_undelivered_periods_and_the_delivered_share() -> None:
    run = broken(BASE, core={0: {"x_periods_undelivered": 60}})
    titles, *rows = columns(format_cpu_table(run))
    at = titles.index("undeliv")
    assert titles[at + 1] == "deliv%"
    assert [row[at] for row in rows] == ["60", "2", "62"]
    assert [row[at + 1] for row in rows] == ["80.0", "98.8", "86.6"]  # 240/300, 160/162, 400/462
    assert total_row(cpu_rows(run)).undelivered == 62


def test_table_shows_the_kernels_interrupt_count_or_a_dash() -> None:
    assert [row[1] for row in columns(format_cpu_table(replace(BASE, kernel=None)))[1:]] == [
        "-", "-", "-"
    ]  # fmt: skip


def test_table_header_in_auto_drain() -> None:
    run = broken(BASE, spec=replace(BASE.spec, drain="auto", drain_ms=500), kicks=None)
    assert "drain auto every 500 ms" in format_cpu_table(run).splitlines()[0]


def test_drop_columns_always_show_overflow_and_dropbuf_sample() -> None:
    run = broken(BASE, percpu={1: {"x_not_running": 0}})
    assert drop_columns(cpu_rows(run)) == ("overflow", "dropbuf_sample")
    assert drop_columns(cpu_rows(BASE)) == ("overflow", "dropbuf_sample", "not_running")


def test_nmi_mode_counts_producer_calls_in_nmi() -> None:
    run = broken(BASE, core={1: {"x_producer_calls_nmi": 150, "x_producer_calls_irq": 10}})
    assert nmi_mode(run) == "NMI on (PMU overflows as NMIs): 390 of 400 producer calls in NMI"


@pytest.mark.parametrize(
    ("cpus", "text"), [((0, 1, 2, 3, 6), "0-3,6"), ((5,), "5"), ((3, 1, 2), "1-3"), ((), "none")]
)
def test_format_cpus(cpus: tuple[int, ...], text: str) -> None:
    assert format_cpus(cpus) == text


def test_verdicts_pass_fail_and_skip() -> None:
    run = broken(BASE, busy={}, bytes_read=0, core={1: {"x_throttled": 1}})
    violations = check_tprof(run)
    lines = format_verdicts(violations, applicable_oracles(run)).splitlines()
    assert [line[:16] for line in lines if not line.startswith(" ")] == [
        "PASS  IRQ       ",
        "PASS  CALLS     ",
        "PASS  RELEASED  ",
        "skip  PEER      ",
        "skip  PROFILE   ",
        "FAIL  THROTTLE  ",
        "PASS  C-2       ",
        "skip  C-3       ",
        "PASS  TP-O1     ",
        "PASS  TP-O2     ",
        "FAIL  TP-O5     ",
        "skip  PLACE     ",
        "PASS  NMI       ",
        "PASS  PROBE     ",
        "skip  TP-O10    ",
        "PASS  STOPPED   ",
        "PASS  ONLINE    ",
    ]
    assert lines[6] == f"      {violations[0]}"
    assert lines[12] == f"      {violations[1]}"
    assert lines[6] == (
        "      THROTTLE on CPU 1: expected x_throttled = 0, observed x_throttled = 1 "
        "(throttling disabled)"
    )


def test_verdicts_name_each_oracle_with_its_description() -> None:
    lines = format_verdicts([]).splitlines()
    assert lines == [f"PASS  {name:<8}  {description}" for name, description in TPROF_ORACLES]


def test_verdicts_never_drop_a_violation_of_an_unknown_oracle() -> None:
    extra = Violation("C-1", 2, "NMIs sent = 10", "x_nmi_total = 9")
    lines = format_verdicts([extra], applicable=()).splitlines()
    assert lines[-2:] == ["FAIL  C-1", f"      {extra}"]
    assert all(line.startswith("skip") for line in lines[:-2])


def test_a_violation_of_a_skipped_oracle_still_fails() -> None:
    violation = Violation("PLACE", 0, "x_nmi_total > 0", "x_nmi_total = 0")
    lines = format_verdicts([violation], applicable={"TP-O1"}).splitlines()
    at = next(i for i, line in enumerate(lines) if "PLACE" in line)
    assert lines[at].startswith("FAIL  PLACE")
    assert lines[at + 1] == f"      {violation}"


def test_summary_is_json_with_the_tables_numbers() -> None:
    run = broken(BASE, core={1: {"x_throttled": 3}})
    violations = check_tprof(run)
    record = json.loads(json.dumps(summary(run, violations)))
    assert record["failed"] == ["THROTTLE"]
    assert record["violations"] == [str(v) for v in violations]
    assert record["nmi_mode"] == "NMI on (PMU overflows as NMIs): 400 of 400 producer calls in NMI"
    assert record["cpus"][1] == {
        "cpu": 1,
        "seen": 160,
        "irq": 160,
        "perf": None,
        "calls": 160,
        "recorded": 150,
        "drops": {
            "overflow": 6,
            "dropbuf_sample": 0,
            "overflow_dropbuf": 0,
            "overflow_emptybuf": 0,
            "nobuf": 0,
            "not_running": 4,
            "nested_drop": 0,
            "stop_discard": 0,
            "quirk_lost": 0,
        },
        "undelivered": 2,
        "delivered_pct": 98.8,
        "throttled": 3,
        "nmi_pct": 100.0,
        "irqoff": 9,
        "probe_hits": 5,
        "probe_runs": 3,
        "mean_us": 3.0,
        "max_us": 12.0,
    }
    assert record["totals"] == total_row(cpu_rows(run)).as_dict()
    assert record["totals"]["cpu"] == "all"
    totals = record["totals"]
    assert (totals["seen"], totals["undelivered"], totals["throttled"]) == (400, 2, 3)
