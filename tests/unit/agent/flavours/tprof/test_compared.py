"""What tprof's own laws say they compared: counts of events, 0 only on nothing to compare."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.agent.flavours.tprof.compared import compared_tprof
from harness.agent.flavours.tprof.oracles import (
    TPROF_ORACLES,
    applicable_oracles,
    check_tprof,
    judge_tprof,
)
from harness.agent.flavours.tprof.report import format_verdicts
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.oracles.core import CORE_ORACLES
from harness.agent.oracles.evidence import Injections
from harness.agent.oracles.report import unjudged
from harness.agent.values.results import Judged
from tests.unit.agent.flavours.tprof.test_oracles import (
    BASE,
    broken,
    core,
    percpu,
    stats,
    tp_d1_run,
)

OWN = [name for name, _ in TPROF_ORACLES if name not in {n for n, _ in CORE_ORACLES}]


def counts(run: TprofRun) -> dict[str, int]:
    """Oracle → n, for the laws `judge_tprof` reports of ``run`` (shared and own)."""
    return {j.oracle: j.n for j in judge_tprof(run)}


def own_failed(run: TprofRun) -> set[str]:
    return {v.oracle for v in check_tprof(run)} & set(OWN)


def test_every_own_law_says_what_it_compared_once() -> None:
    assert sorted(j.oracle for j in compared_tprof(BASE)) == sorted(OWN)


def test_the_consistent_run_counts_its_events_by_hand() -> None:
    # CPU 0: 240 producer calls, CPU 1: 160; 5 swaps each; 350 records read; the pinned
    # loops' samples: 150 of pid 101 on CPU 0, 100 of pid 202 on CPU 1; 3 probe windows.
    found = counts(BASE)
    own = {name: found[name] for name in OWN if name in applicable_oracles(BASE)}
    assert own == {
        "TP-O1": 400, "TP-O2": 10, "TP-O5": 350, "PLACE": 250, "NMI": 800, "PROBE": 3,
        "STOPPED": 1, "ONLINE": 400,
    }  # fmt: skip
    lines = format_verdicts(check_tprof(BASE), applicable_oracles(BASE), judge_tprof(BASE))
    passed = {line.split()[1]: line for line in lines.splitlines() if line.startswith("PASS")}
    assert all(f"(n={n} " in passed[name] for name, n in own.items())


def test_the_counts_follow_the_run_not_its_cpus() -> None:
    run = broken(BASE, core={1: {"x_producer_calls": 150, "x_nmi_total": 150}},
                 samples=BASE.samples[:-3], stats={"x_swaps": 11})  # fmt: skip
    found = counts(run)
    # NMI: 390 overflows + the 400 producer calls the per-context counters still hold.
    assert (found["TP-O1"], found["ONLINE"], found["NMI"]) == (390, 390, 790)
    assert (found["TP-O5"], found["TP-O2"]) == (347, 11)


def test_tp_d1_counts_injected_calls_records_and_swaps() -> None:
    # 48 injected calls on CPU 0, 16 records read, 1 CPU × (4 kicks + 2) swaps; NMI: 30
    # overflows and the 48 calls' contexts.
    found = counts(tp_d1_run(quirk=False))
    assert [found[name] for name in ("TP-O1", "TP-O5", "TP-O2", "NMI")] == [48, 16, 6, 78]


def test_place_counts_the_loop_samples_only_where_the_loop_is_known() -> None:
    loop = (0x400100, 0x400180)
    inside = tuple(replace(s, flags=0, pc=loop[0] + 8) for s in BASE.samples[:10])
    run = replace(BASE, samples=(*inside, *BASE.samples[10:]), spin_loop=loop)
    assert counts(run)["PLACE"] == 10  # the other 240 samples of the loops' pids: kernel PCs


def test_probe_counts_every_cpus_windows_with_pseudo_nmi_off() -> None:
    run = broken(BASE, nmi_expected=False, core={0: {"x_probe_runs": 2}, 1: {"x_probe_hits": 0}})
    assert counts(run)["PROBE"] == 5


def test_stop_latency_counts_the_stop_the_module_timed() -> None:
    timed = broken(BASE, instruction_clock=True, stats={"x_stop_ns": 5_919_280})
    assert counts(timed)["TP-O10"] == 1
    assert counts(broken(timed, stats={"x_stop_ns": 0}))["TP-O10"] == 0


def silent_run() -> TprofRun:
    """BASE with nothing happening: no call, overflow, swap, record or probe window.

    Auto drain for 1 s, so TP-O2 applies (0 swaps under its ceiling); no kernel evidence.
    """
    zeros = {cpu: core() for cpu in BASE.counters.core}
    counters = replace(BASE.counters, core=zeros, stats=stats(),
                       stats_percpu={cpu: percpu() for cpu in zeros})  # fmt: skip
    return replace(BASE, counters=counters, samples=(), bytes_read=0, kicks=None, runtime_s=1.0,
                   spec=replace(BASE.spec, drain="auto"), kernel=None, probe_cpus=())  # fmt: skip


@pytest.mark.parametrize("name", ["TP-O1", "ONLINE", "TP-O2", "TP-O5", "NMI"])
def test_a_law_that_held_over_nothing_is_unjudged(name: str) -> None:
    run = silent_run()
    assert name in applicable_oracles(run)
    assert name not in own_failed(run)  # it held: over nothing
    judged = [j for j in judge_tprof(run) if j.oracle == name]
    assert [j.n for j in judged] == [0]
    assert judged[0].why
    assert unjudged(judged, (name,)) == [f"{name} UNJUDGED: {judged[0]}"]
    verdicts = format_verdicts(check_tprof(run), applicable_oracles(run), judge_tprof(run))
    assert any(line.startswith(f"UNJUDGED  {name} ") for line in verdicts.splitlines())


def test_place_with_only_injected_samples_compared_nothing() -> None:
    run = broken(BASE, busy={0: (101,), 1: (303,)}, spec=replace(BASE.spec, pmu_produce=False),
                 injections=Injections(nmi={0: 240, 1: 160}),
                 samples=tuple(s for s in BASE.samples if s.pid != 101))  # fmt: skip
    assert "PLACE" not in own_failed(run)
    assert counts(run)["PLACE"] == 0


def test_probe_without_a_probe_cpu_compares_nothing_and_does_not_apply() -> None:
    run = tp_d1_run(quirk=False)
    assert "PROBE" not in applicable_oracles(run)  # no window to judge: not a PASS over nothing
    assert [j.n for j in compared_tprof(run) if j.oracle == "PROBE"] == [0]


def test_stopped_counts_the_counters_only_when_it_prints_its_buffers() -> None:
    assert compared_tprof(BASE)[-1] == Judged(
        "STOPPED", 1, "counters read after STOP, its current buffers counted",
        why="the module prints no cur_buffers",
    )  # fmt: skip
    unprinted = replace(BASE, counters=replace(BASE.counters, state={}))
    assert [j.n for j in compared_tprof(unprinted) if j.oracle == "STOPPED"] == [0]
