"""What dt's own laws compared: each n counted by hand from test_oracles' runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.agent.flavours.dt.compared import compared_dt
from harness.agent.flavours.dt.oracles import applicable_dt_oracles, check_dt, judge_dt
from harness.agent.flavours.dt.report import format_dt_verdicts
from harness.agent.flavours.dt.results import DtOpenStats, DtRun
from harness.agent.flavours.dt.run import ReaderStatus, parse_reader_status
from harness.agent.oracles.core import CORE_ORACLES
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.oracles.report import unjudged
from harness.agent.values.results import Judged
from tests.unit.agent.flavours.dt.test_oracles import (
    BASE,
    EV,
    HALF3,
    core,
    dt_d1_run,
    dt_d2_run,
    gstats,
    opens,
    percpu,
    pmu_run,
    two_readers,
)

OWN = ("DT-O1", "DT-O2", "DT-O3", "DT-O4", "DT-O6", "DT-O7", "DT-O8", "DT-O10", "DT-INJ", "NMI")


def counts(run: DtRun) -> dict[str, int]:
    return {judged.oracle: judged.n for judged in compared_dt(run)}


def found(run: DtRun, oracle: str) -> Judged:
    (judged,) = [j for j in compared_dt(run) if j.oracle == oracle]
    return judged


def test_every_own_law_has_one_count() -> None:
    """judge_dt passes one count per own law: the applicable ones come back, no more."""
    assert [j.oracle for j in compared_dt(BASE)] == list(OWN)
    assert not {name for name, _ in CORE_ORACLES} & set(OWN)
    own = [j.oracle for j in judge_dt(BASE) if j.oracle in OWN]
    assert own == sorted(applicable_dt_oracles(BASE) & set(OWN))


def test_the_consistent_run_counted_by_hand() -> None:
    """BASE: CPU 0 27 producer calls (20 injected, 7 of them in its one nested window),
    CPU 1 5; 20 events read; after the read 20 read, 6 dropped, 3 skipped, 7 recursed;
    4 overflows (3 + 1), 32 producer calls in NMI."""
    assert counts(BASE) == {
        "DT-O1": 27 + 1 + 5,  # gets: producer calls and the window's outer get
        "DT-O2": 33 - 7,  # the gets outside the window: 15 committed + 6 dropped, 5
        "DT-O3": 20,  # events read
        "DT-O4": 20 + 6 + 3 + 7,
        "DT-O6": 33,
        "DT-O7": 32,  # producer calls: no profile ticks
        "DT-O8": 0,  # no background reader (DT-O8 does not apply)
        "DT-O10": 20,  # committed: 15 + 5
        "DT-INJ": 25 + 7 + 1,
        "NMI": 4 + 32,  # overflows and producer calls, each in its context
    }


def test_n_never_counts_cpus_alone() -> None:
    one_cpu = counts(pmu_run())
    assert (one_cpu["DT-O1"], one_cpu["DT-O3"], one_cpu["DT-O7"]) == (20, 15, 24)


def test_dt_d1_counts_the_gstats_it_compared() -> None:
    """With the quirk on 2 CPUs, skiptick and recurevt are CPU 1's (0): 5 read only."""
    assert found(dt_d1_run(ncpu=2, quirk=True), "DT-O4").n == 5
    assert found(dt_d1_run(ncpu=2, quirk=False), "DT-O4").n == 5 + 2 + 3


def test_ragged_reads_count_bytes() -> None:
    judged = found(dt_d2_run(), "DT-O3")
    assert (judged.n, judged.what.split(" in ")[0]) == (2 * HALF3, "bytes read")
    assert found(dt_d2_run(quirk=False), "DT-O3").n == 3  # whole reads: 3 events decoded


def test_dt_l5_counts_the_periods_of_the_cpus_it_judges() -> None:
    assert found(pmu_run(), "DT-O7").n == 24  # 24_500_000 // 1_000_000
    without_kernel = found(replace(pmu_run(), kernel=None), "DT-O7")
    assert (without_kernel.n, without_kernel.judged) == (0, False)
    assert "interrupt count" in without_kernel.why
    twice = {0: {**pmu_run().core[0], "x_events_created": 2}}
    assert found(replace(pmu_run(), core=twice), "DT-O7").n == 0


@pytest.mark.parametrize(("reads", "judged"), [(6, True), (0, False)])
def test_the_background_reader_counts_its_reads(reads: int, judged: bool) -> None:
    run = replace(BASE, reader_during_recording=True, background_errno="EINTR",
                  background_reads=reads)  # fmt: skip
    (o8,) = [j for j in judge_dt(run) if j.oracle == "DT-O8"]
    assert (o8.n, o8.judged) == (reads, judged)


def test_readers_racing_count_the_committed_events() -> None:
    run = two_readers(BASE.events[::2] + BASE.events[1::2])
    (o10,) = [j for j in judge_dt(run) if j.oracle == "DT-O10"]
    assert (o10.n, "2 readers" in o10.what) == (20, True)


def idle_run() -> DtRun:
    """BASE where nothing happened: no producer call, no window, no event, no overflow."""
    empty = DtOpenStats(gstats(0, 0, 0, 0), {0: percpu(), 1: percpu()}, opens(0, 0))
    quiet = KernelEvidence("arm-pmu", {0: 40, 1: 9}, {0: 40, 1: 9}, {0: 40, 1: 9})
    return replace(BASE, before_read=empty, after_read=empty, events=(), bytes_read=0,
                   core={0: core(x_events_created=1), 1: core(x_events_created=1)},
                   injected={}, nested={}, windows={}, skips={}, kernel=quiet,
                   injections=Injections(), reader_during_recording=True,
                   background_errno="EINTR", concurrent_readers=2)  # fmt: skip


def test_a_run_with_nothing_to_compare_is_unjudged_for_every_own_law() -> None:
    run = idle_run()
    assert check_dt(run) == []  # every law held, over nothing
    assert counts(run) == dict.fromkeys(OWN, 0)
    own = [j for j in judge_dt(run) if j.oracle in OWN]
    assert {j.oracle for j in own} == set(OWN) - {"DT-O2"}  # a reader ran: no DT-O2
    assert all(j.why for j in own)
    missing = unjudged(own)
    assert [line.split(" ")[0] for line in missing] == [j.oracle for j in own]
    verdicts = format_dt_verdicts([], applicable_dt_oracles(run), judge_dt(run))
    assert "UNJUDGED  DT-O3" in verdicts
    assert "no event read" in verdicts


def test_bursts_without_a_producer_call_judge_no_skipped_tick() -> None:
    """Forced skips but no producer call after them: DT-O7 compared nothing."""
    run = replace(idle_run(), skips={1: 3})
    assert (found(run, "DT-O7").n, found(run, "DT-O7").why) == (0, "no producer call on any CPU")


def test_the_reader_status_file() -> None:
    assert parse_reader_status(f"bytes={3 * EV} reads=1 errno=EINTR\n") == ReaderStatus("EINTR", 1)
    broken = parse_reader_status("bytes=0")
    assert (broken.reads, broken.errno) == (0, "no errno in 'bytes=0'")
