from __future__ import annotations

from dataclasses import replace

from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.dt.oracles import DT_ORACLES, applicable_dt_oracles, check_dt
from harness.agent.flavours.dt.report import (
    TITLES,
    dt_nmi_mode,
    dt_rows,
    dt_total_row,
    format_dt_table,
    format_dt_verdicts,
    gstats_line,
)
from harness.agent.values.results import Violation
from tests.unit.agent.flavours.dt.test_oracles import (
    BASE,
    after,
    after_open,
    consistent_run,
    dt_d1_run,
    pmu_run,
)

HEADER = (
    f"dt: event cycles, period 1000000, quirks 0x0, read size {4 * DT.record.size}, "
    "online CPUs 0-1, "
    "NMI on (PMU overflows as NMIs)"
)
GSTATS = (
    "GSTATS after the read: readevt 20, dropevt 6, skiptick 3, recurevt 7; "
    "open: x_wakeups 9, x_partial_events 0"
)
#: BASE by hand: CPU 0 saw 3 overflows (the kernel counted 43 - 40 = 3), none undelivered;
#: CPU 1 saw 1 (10 - 9) with 2 undelivered, so 1 of 3 periods arrived: 33.3 %; all: 4 of 6.
CONSISTENT_CELLS = [
    [*("cpu", "irq", "seen", "calls", "committed", "read", "dropevt", "recurevt"),
     *("skiptick", "inring", "seq", "nmi%", "undeliv", "deliv%")],
    ["0", "3", "3", "28", "15", "15", "6", "7", "0", "15", "15", "100.0", "0", "100.0"],
    ["1", "1", "1", "5", "5", "5", "0", "0", "3", "5", "5", "100.0", "2", "33.3"],
    ["all", "4", "4", "33", "20", "20", "6", "7", "3", "20", "-", "100.0", "2", "66.7"],
]  # fmt: skip
#: The verdict and name columns of a clean run: every core oracle, then dt's own.
PASSING = [
    *("PASS  IRQ", "PASS  CALLS", "PASS  RELEASED", "skip  PEER", "skip  PROFILE"),
    *("PASS  THROTTLE", "PASS  C-2", "skip  C-3"),
    *("PASS  DT-O1", "PASS  DT-O2", "PASS  DT-O3", "PASS  DT-O4", "PASS  DT-O6", "PASS  DT-O7"),
    *("skip  DT-O8", "skip  DT-O10", "PASS  DT-INJ", "PASS  NMI"),
]


def heads(verdicts: str) -> list[str]:
    """Verdict and oracle name of each verdict line (violations, indented, left out)."""
    return [" ".join(line.split()[:2]).replace(" ", "  ", 1)
            for line in verdicts.splitlines() if not line.startswith(" ")]  # fmt: skip


def columns(table: str) -> list[list[str]]:
    """The table's rows (between the header line and the GSTATS line), split into cells."""
    return [line.split() for line in table.splitlines()[1:-1]]


def test_table_of_the_consistent_run() -> None:
    table = format_dt_table(BASE)
    assert table.splitlines()[0] == HEADER
    assert columns(table) == CONSISTENT_CELLS
    assert table.splitlines()[-1] == GSTATS


def test_table_rows_are_aligned() -> None:
    assert len({len(line) for line in format_dt_table(BASE).splitlines()[1:-1]}) == 1


def test_table_titles() -> None:
    assert columns(format_dt_table(BASE))[0] == list(TITLES)


def test_table_header_with_pseudo_nmi_off() -> None:
    header = format_dt_table(consistent_run(nmi=False)).splitlines()[0]
    assert header.endswith(
        "online CPUs 0-1, NMI off (pseudo-NMI off, or a software clock: overflows are normal IRQs)"
    )
    assert dt_nmi_mode(BASE) == "NMI on (PMU overflows as NMIs)"


def test_table_of_the_dt_d1_run_shows_gstats_as_returned() -> None:
    table = format_dt_table(dt_d1_run(ncpu=2, quirk=True))
    assert f"quirks 0x10000, read size {DT.record.size}, online CPUs 0-1" in table.splitlines()[0]
    assert columns(table)[1:] == [
        # no kernel counts in this run: irq "-"; CPU 0 saw 2 overflows, none undelivered
        ["0", "-", "2", "8", "5", "5", "0", "3", "2", "5", "5", "100.0", "0", "100.0"],
        ["1", "-", "0", "0", "0", "0", "0", "0", "0", "0", "0", "-", "0", "-"],
        ["all", "-", "2", "8", "5", "5", "0", "3", "2", "5", "-", "100.0", "0", "100.0"],
    ]
    assert table.splitlines()[-1] == (
        "GSTATS after the read: readevt 5, dropevt 0, skiptick 0, recurevt 0; "
        "open: x_wakeups 2, x_partial_events 0"
    )


def test_inring_is_before_the_read_and_the_rest_after() -> None:
    rows = dt_rows(after(1, dc_readevt=4, x_seq=6)(BASE))
    assert (rows[1].read, rows[1].seq, rows[1].inring) == (4, 6, 5)


def test_total_row_sums_and_has_no_seq() -> None:
    total = dt_total_row(dt_rows(BASE))
    assert (total.cpu, total.calls, total.committed, total.seq, total.seen) == (
        None,
        33,
        20,
        None,
        4,
    )
    assert total.nmi_pct == 100.0


def test_row_of_a_cpu_only_the_core_knows() -> None:
    run = replace(BASE, core={**BASE.core, 2: {"x_nmi_total": 4, "x_nmi_ctx_ok": 1}})
    row = dt_rows(run)[2]
    assert (row.cpu, row.calls, row.inring, row.seq, row.nmi_pct) == (2, 0, 0, 0, 25.0)


def test_gstats_line_reads_missing_values_as_zero() -> None:
    empty = replace(BASE.after_read, gstats={}, open={})
    assert gstats_line(replace(BASE, after_read=empty)) == (
        "GSTATS after the read: readevt 0, dropevt 0, skiptick 0, recurevt 0; "
        "open: x_wakeups 0, x_partial_events 0"
    )


def test_verdicts_of_the_consistent_run() -> None:
    assert heads(format_dt_verdicts(check_dt(BASE), applicable_dt_oracles(BASE))) == PASSING


def test_verdicts_list_violations_under_their_oracle() -> None:
    run = after_open(x_evtcnt=1)(BASE)
    lines = format_dt_verdicts(check_dt(run), applicable_dt_oracles(run)).splitlines()
    at = lines.index(next(line for line in lines if line.startswith("FAIL")))
    assert lines[at].startswith("FAIL  DT-O3     drain: every committed event read once")
    assert lines[at + 1] == (
        "      DT-O3 on all CPUs: expected x_evtcnt = 0, observed x_evtcnt = 1 "
        "(after reading everything)"
    )
    assert len(lines) == len(DT_ORACLES) + 1


def test_verdicts_skip_what_does_not_apply() -> None:
    run = replace(pmu_run(), kernel=None)  # no kernel counts, no readers, PMU ticks
    verdicts = format_dt_verdicts(check_dt(run), applicable_dt_oracles(run))
    skipped = [h.split()[1] for h in heads(verdicts) if h.startswith("skip")]
    assert skipped == ["IRQ", "RELEASED", "PEER", "PROFILE", "C-3", "DT-O8", "DT-O10", "DT-INJ"]
    assert not [h for h in heads(verdicts) if h.startswith("FAIL")]


def test_verdicts_without_applicable_pass_everything_clean() -> None:
    assert heads(format_dt_verdicts([])) == [h.replace("skip", "PASS") for h in PASSING]


def test_verdicts_keep_violations_of_unknown_oracles() -> None:
    extra = Violation("X-NEW", 1, "|seen - other| ≤ 3", "7")
    lines = format_dt_verdicts([extra]).splitlines()
    assert lines[-2:] == [
        "FAIL  X-NEW",
        "      X-NEW on CPU 1: expected |seen - other| ≤ 3, observed 7",
    ]
