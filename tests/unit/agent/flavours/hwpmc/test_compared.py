"""What each hwpmc law compared, counted by hand on the runs `test_oracles` builds.

n counts the calls, entries, records, PMCs or ops a law held to its equation, never CPUs:
`healthy` has 2 CPUs with 10 producer calls each, 10 recorded, 10 swept, 18 log records.
"""

from __future__ import annotations

from dataclasses import replace

from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.hwpmc.oracles import (
    HWPMC_ORACLES,
    applicable_hwpmc_oracles,
    check_hwpmc,
    compared_hwpmc,
    judge_hwpmc,
)
from harness.agent.flavours.hwpmc.report import format_hwpmc_verdicts
from harness.agent.flavours.hwpmc.results import HwpmcRun, OpOutcome
from harness.agent.oracles.core import CORE_ORACLES
from harness.agent.oracles.evidence import Injections
from harness.agent.oracles.report import unjudged
from harness.agent.values.results import AgentCounters
from tests.unit.agent.flavours.hwpmc.test_oracles import (
    SPEC,
    N,
    core,
    counting,
    healthy,
    percpu,
    with_percpu,
)

OWN = tuple(name for name, _ in HWPMC_ORACLES if name not in dict(CORE_ORACLES))


def counts(run: HwpmcRun) -> dict[str, int]:
    """Each own law's n, applicable or not."""
    return {j.oracle: j.n for j in compared_hwpmc(run)}


def verdict(run: HwpmcRun, oracle: str) -> str:
    """``oracle``'s verdict line for ``run`` (held: PASS or UNJUDGED by its count)."""
    text = format_hwpmc_verdicts(check_hwpmc(run), applicable_hwpmc_oracles(run),
                                 judged=judge_hwpmc(run))  # fmt: skip
    (line,) = [line for line in text.splitlines() if line.split()[1:2] == [oracle]]
    return line


def idle() -> HwpmcRun:
    """`healthy`'s PMCs with nothing sampled: no call, entry, sweep or record anywhere."""
    run = healthy()
    pc = {c: percpu() for c in (0, 1)}
    stats = dict.fromkeys(HWPMC.stat_names, 0)
    snap = AgentCounters(info={"stall": "hardware"}, stats=stats, stats_percpu=pc,
                         core={c: core() for c in (0, 1)})  # fmt: skip
    return replace(run, counters=snap, stopped=pc, stats_later=stats, log=(), kernel=None)


def test_every_own_law_has_one_count_and_no_core_law_is_counted_here() -> None:
    assert [j.oracle for j in compared_hwpmc(healthy())] == list(OWN)
    assert "NMI" in OWN
    assert "IRQ" not in OWN


def test_a_healthy_run_counts_calls_entries_records_and_releases() -> None:
    run = healthy()
    assert check_hwpmc(run) == []
    assert {j.oracle: j.n for j in judge_hwpmc(run) if j.oracle in OWN} == {
        "HW-O1": 20,  # 10 producer calls on each CPU
        "HW-O2": 20,  # 10 entries recorded on each CPU
        "HW-O3": 20,  # 10 swept on each CPU
        "HW-O6": 20,  # 10 recorded by STOP on each CPU
        "HW-O7": 4,  # 2 stopped PMCs, 2 RELEASEs
        "HW-O10": 18,  # 9 + 9 records in the log
        "NMI": 40,  # 20 overflow entries, 20 producer calls in NMI
    }
    line = verdict(run, "HW-O1")
    assert line.startswith("PASS ")
    assert line.endswith("(n=20 producer calls on 2 CPUs, each held to one outcome)")
    # No fill of the plan's (sweeps suppressed): HW-O4 does not apply, nor pass over nothing.
    assert "HW-O4" not in applicable_hwpmc_oracles(run)
    assert [j.n for j in compared_hwpmc(run) if j.oracle == "HW-O4"] == [0]


def test_a_run_that_compared_nothing_is_unjudged_with_why() -> None:
    run = idle()
    assert check_hwpmc(run) == []
    found = counts(run)
    nothing = ("HW-O1", "HW-O2", "HW-O3", "HW-O4", "HW-O6", "HW-O10", "NMI")
    assert [found[name] for name in nothing] == [0] * len(nothing)
    assert found["HW-O7"] == 4  # its PMCs were still stopped and released
    problems = unjudged(judge_hwpmc(run), ("HW-O1", "HW-O10", "HW-O7"))
    assert problems == [
        "HW-O1 UNJUDGED: 0 producer calls on 2 CPUs, each held to one outcome: "
        "no producer call on any CPU",
        "HW-O10 UNJUDGED: 0 records read from hwpmc/log, each checked whole (seq, CPU, flags, "
        "pid, depth): no record in hwpmc/log",
    ]
    assert verdict(run, "HW-O3").startswith("UNJUDGED ")
    assert verdict(run, "HW-O7").startswith("PASS ")
    released = replace(run, stopped_pmcs=(), releases=())
    assert counts(released)["HW-O7"] == 0


def test_the_fill_counts_injected_calls_and_the_gate_ring_full_calls() -> None:
    fill = {c: percpu(x_recorded=N, x_inring=N, x_bufferfull=5, x_stall_events=1) for c in (0, 1)}
    run = replace(
        healthy(),
        fill={0: N + 5, 1: N + 5},
        checkpoints={"fill": fill},
        injections=Injections(nmi={0: N + 5, 1: N + 5}, bursts={0: 1, 1: 1}),
    )
    assert [v for v in check_hwpmc(run) if v.oracle in ("HW-O2", "HW-O4")] == []
    assert counts(run)["HW-O4"] == 2 * (N + 5)  # every CPU injected: none gated
    gated = with_percpu(healthy(), 0, x_bufferfull=2, x_restarts=1, x_recorded=8)
    gated = with_percpu(gated, 1, x_bufferfull=1, x_restarts=1, x_recorded=9)
    assert counts(gated)["HW-O4"] == 3  # 2 + 1 calls that found a ring full
    assert counts(replace(gated, counters=replace(gated.counters, info={})))["HW-O4"] == 0


def test_the_largest_table_is_every_entry_recorded() -> None:
    # Mid-run tables hold fewer entries than the final ones: counted once, at the most.
    mid = {c: percpu(x_recorded=4, x_swept=4) for c in (0, 1)}
    run = replace(healthy(), checkpoints={"mid": mid})
    assert check_hwpmc(run) == []
    assert counts(run)["HW-O2"] == 20
    judged = next(j for j in compared_hwpmc(run) if j.oracle == "HW-O2")
    assert "at 3 reads" in judged.what


def test_restart_pair_ops_and_counting_count_what_the_harness_did() -> None:
    restart = {0: percpu(x_recorded=N, x_swept=N, x_restarts=1)}
    run = replace(healthy(), fill={0: N + 5}, resume={0: 3},
                  checkpoints={"fill": {0: percpu(x_recorded=N)}, "restart": restart,
                               "resumed": {0: percpu(x_recorded=N + 3)}})  # fmt: skip
    assert counts(run)["HW-O5"] == 3
    stalled = {0: percpu(x_recorded=4, x_inring=4), 1: percpu(x_recorded=50)}
    resumed = {0: percpu(x_recorded=9, x_restarts=1), 1: percpu(x_recorded=90)}
    pair = replace(healthy(), pair=(0, 1), spec=SPEC.with_params(nsamples=4),
                   checkpoints={"a_stalled": stalled, "a_resumed": resumed})  # fmt: skip
    assert [v for v in check_hwpmc(pair) if v.oracle == "HW-O8"] == []
    assert counts(pair)["HW-O8"] == 4 + 50 + 5  # A's full ring, B's, A's after its restart
    assert counts(healthy())["HW-O8"] == 0
    ops = (OpOutcome("version", "ok", "ok"), OpOutcome("unknown-op", "EINVAL", "EINVAL"))
    assert counts(replace(healthy(), ops=ops))["HW-O9"] == 2
    assert counts(healthy())["HW-O9"] == 0
    sc = replace(healthy(), counting=counting())
    assert counts(sc)["HW-SC"] == 1_500_000_000  # RW after STOP - SETCOUNT
    assert counts(replace(sc, counting=counting(stopped=counting().initial)))["HW-SC"] == 0
    assert counts(healthy())["HW-SC"] == 0
