"""What kprof's own laws say they compared: counts taken by hand from the fixtures.

The good run of `test_oracles` (one CPU): 3R + 7 injected task calls and one kpdata
write while tracing (N = 3R + 8), one kpdata write before start, 2R + 8 records read,
nine readings, five reads past the end, ten kpctl probes, one record (L bytes)
queued at the close, 10 overflows. A run that traced nothing holds every law, yet
the laws with nothing to compare say UNJUDGED, not PASS.
"""

from __future__ import annotations

from dataclasses import replace

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.compared import compared_kprof
from harness.agent.flavours.kprof.oracles import (
    KPROF_ORACLES,
    applicable_kprof_oracles,
    check_kprof,
    judge_kprof,
)
from harness.agent.flavours.kprof.report import format_kprof_verdicts
from harness.agent.flavours.kprof.results import KprofRun, KprofStats
from harness.agent.oracles.core import CORE_ORACLES
from harness.agent.oracles.evidence import Injections
from harness.agent.oracles.report import unjudged
from tests.unit.agent.flavours.kprof.test_oracles import (
    INJECTED,
    L,
    N,
    R,
    good_run,
    percpu,
    stats,
)

OWN = [name for name, _ in KPROF_ORACLES if name not in {n for n, _ in CORE_ORACLES}]


def counts(run: KprofRun) -> dict[str, int]:
    return {j.oracle: j.n for j in compared_kprof(run)}


def test_each_own_law_counts_what_its_check_compared_in_the_good_run() -> None:
    assert counts(good_run()) == {
        "KP-O1": INJECTED + 2,  # core's producer calls + both kpdata writes (one idle)
        "KP-O2": N,  # the harness's records on CPU 0: injected + the kpdata write
        "KP-O3": 3,  # F = floor((N - 1)/R) full blocks offered to the queue
        "KP-O4": 2 * R + 8,  # two accepted blocks and the flushed eight records
        "KP-O5": 7,  # every reading but queued and reopened
        "KP-O6": 2,  # qlen after R, after R + 1
        "KP-O7": 5,  # reads past the end
        "KP-O8": 11,  # ten probes and one flush while stopped
        "KP-O9": L,  # one record's bytes queued at the close
        "KP-O10": 2,  # one write while tracing, one idle
        "NMI": 10 + INJECTED,  # overflows the core saw, task calls by their context
    }


def test_every_own_law_has_one_count_and_the_verdicts_show_it() -> None:
    run = good_run()
    assert [j.oracle for j in compared_kprof(run)] == OWN
    verdicts = format_kprof_verdicts(check_kprof(run), applicable_kprof_oracles(run),
                                     judge_kprof(run))  # fmt: skip
    assert "UNJUDGED" not in verdicts, verdicts
    assert f"(n={2 * R + 8} records read to EOF (4374 trace, 0 status)" in verdicts
    assert "(n=3 full blocks offered to the queue" in verdicts


def test_counts_sum_over_cpus_not_count_them() -> None:
    run = good_run()
    cpu1 = percpu(x_records_committed=5)
    final = run.readings[res.FINAL]
    two = KprofStats(final.stats, {0: final.percpu[0], 1: cpu1})
    core = {0: run.core[0], 1: {"x_producer_calls": 5, "x_nmi_total": 4}}
    wider = replace(run, readings={**run.readings, res.FINAL: two}, core=core,
                    core_at_final=core, injected={0: INJECTED, 1: 5})  # fmt: skip
    found = counts(wider)
    assert (found["KP-O1"], found["KP-O2"]) == (INJECTED + 2 + 5, N + 5)
    assert found["NMI"] == 10 + INJECTED + 4  # CPU 1: 4 overflows, its calls named by no context
    assert found["KP-O3"] == 3  # five records on CPU 1 fill no block


def idle_run() -> KprofRun:
    """A session that traced nothing: no call, no record, no overflow; every law holds."""
    empty = stats(percpu())
    readings = {name: empty for name in (res.BEFORE_STOP, res.AFTER_STOP, res.AFTER_READ,
                                          res.FINAL)}  # fmt: skip
    return replace(good_run(), readings=readings, trace=(), bytes_read=0, core={0: {}},
                   core_at_final={0: {}}, injected={}, kpdata={}, kpdata_idle=(),
                   control={}, injections=Injections())  # fmt: skip


def test_a_run_that_traced_nothing_holds_every_law_and_judges_none() -> None:
    run = idle_run()
    assert check_kprof(run) == []
    found = {j.oracle: j for j in compared_kprof(run)}
    nothing = {"KP-O1", "KP-O2", "KP-O3", "KP-O4", "KP-O6", "KP-O8", "KP-O9", "KP-O10", "NMI"}
    assert {name for name, j in found.items() if not j.judged} == nothing
    assert all(found[name].why for name in nothing)
    assert (found["KP-O5"].n, found["KP-O7"].n) == (4, 5)  # qlen still read, EOF still met
    verdicts = format_kprof_verdicts([], applicable_kprof_oracles(run), judge_kprof(run))
    for name in ("KP-O1", "KP-O2", "KP-O3", "KP-O4", "NMI"):
        assert f"UNJUDGED  {name}" in verdicts, verdicts
    assert unjudged(judge_kprof(run), ("KP-O1",)) == [
        "KP-O1 UNJUDGED: 0 producer calls on 1 CPU (core count + kpdata writes), each in one "
        "counter: no producer call on any CPU"
    ]


def test_no_full_block_leaves_the_queue_law_unjudged() -> None:
    """R records on CPU 0: KP-O2 placed R records, KP-O3 was offered no full block."""
    run = replace(good_run(), injected={0: R}, kpdata={})
    found = {j.oracle: j for j in compared_kprof(run)}
    assert (found["KP-O2"].n, found["KP-O3"].n) == (R, 0)
    assert "no CPU filled a block" in str(found["KP-O3"])


def test_a_stopped_session_with_no_flush_reading_counts_the_probes_alone() -> None:
    readings = {k: v for k, v in good_run().readings.items() if k != res.AFTER_FLUSH}
    run = replace(good_run(), readings=readings)
    assert counts(run)["KP-O8"] == 10
