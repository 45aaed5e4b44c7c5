"""The tprof oracles of seeds-spec §7.1 and §7 (common), as pure checks on one run.

Each ``check_*`` takes a `TprofRun` and returns every way the run breaks its law,
as readable `Violation` values (an empty list means pass); `check_tprof` runs
every applicable one, so a failed law never hides the others::

    violations = check_tprof(run)
    {v.oracle for v in violations}      # {"TP-O1", "THROTTLE"}
    for name, description in TPROF_ORACLES:   # report order
        ...

The shared oracles (IRQ, CALLS, RELEASED, THROTTLE, C-2 in
`harness.agent.oracles.core`) run first: they tie the producer calls TP-O1 starts
from to the kernel's own interrupt count and to the injections the harness sent.
The parsers guarantee every counter name of the flavour's data is present. The
comparisons themselves are `harness.agent.oracles.laws`'s.

Checks removed because they could not fail (issue 23), and what checks the same
numbers against evidence instead:

* "Σ_c x_<outcome> = the global statistic" (TP-O1, for every outcome and x_swaps),
  and TP-L2 "Σ_c x_producer_calls = the global statistics + Σ_c current buffer".
  The module builds every global statistic it prints by summing the same per-CPU
  counters (``tp_values`` in ``tprof.c.j2``: ``stat_sources`` of ``data.py``), so
  the first was an identity and the second is TP-L1 summed over CPUs. TP-L1 holds
  per CPU against the core's ``x_producer_calls``, which CALLS ties to the kernel's
  interrupt count and the harness's injections; TP-O5 holds ``sample`` against the
  records read, per CPU; TP-O2 holds ``x_swaps`` against the kicks the harness sent.
* The auto-drain floor ``2·ncpu ≤ x_swaps`` (TP-O2). START and STOP swap every
  online CPU once each, and the periodic drain adds about runtime/drain_ms more per
  CPU, so a run as long as the standard one exceeds the floor whatever START and
  STOP do. The START and STOP swaps are counted exactly by the manual-drain form
  ``x_swaps = ncpu × (K + 2)`` (the exact run; mutant ``skip_kick_swap``); the
  auto-drain ceiling stays.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from harness.agent.flavours.tprof.budgets import check_stop_latency
from harness.agent.flavours.tprof.compared import compared_tprof
from harness.agent.flavours.tprof.data import TPROF, TPROF_DROP_CAUSES
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.judging import Laws
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    core_view_of,
)
from harness.agent.oracles.laws import Law, all_equal, at_least, at_most, sums_to, zero
from harness.agent.oracles.nmi import check_nmi
from harness.agent.values.results import Judged, Violation

#: Oracle names and one-line descriptions, in report order.
#: Its own oracles, after the shared ones, in report order.
_OWN: tuple[tuple[str, str], ...] = (
    ("TP-O1", "conservation: every producer call is recorded, dropped with a cause or current"),
    ("TP-O2", "swaps: buf + emptybuf + dropbuf = x_swaps = ncpu × (kicks + 2), or auto ceiling"),
    ("TP-O5", "read completeness: records read = sample per CPU, every one filled, online CPUs"),
    ("PLACE", "samples land on the CPUs where the pinned workload ran"),
    ("NMI", "producer context matches the pseudo-NMI mode the guest booted with"),
    ("PROBE", "overflows land inside IRQ-off probe windows iff pseudo-NMI is on"),
    ("TP-O10", "STOP returns within 1 s (+ drain period), in instructions (-icount runs only)"),
    ("STOPPED", "after STOP no CPU holds a current buffer: a kick that lost the race is refused"),
    ("ONLINE", "no producer call finds its CPU without a buffer: set up before it is armed"),
)
TPROF_ORACLES = (*CORE_ORACLES, *_OWN)

#: Per-CPU outcome → the global statistic that sums it (same name unless listed).
_GLOBAL_NAME: dict[str, str] = {
    "x_sample": "sample",
    "x_overflow": "overflow",
    "x_dropbuf_sample": "dropbuf_sample",
}
#: Where a producer call can end, per CPU, other than the current buffer.
OUTCOMES: tuple[str, ...] = ("x_sample", *(name for name, _ in TPROF_DROP_CAUSES))
_CURRENT: tuple[str, ...] = ("x_cur_used", "x_cur_overflow")
_TP_D1 = TPROF.quirk_bit("TP-D1")


def global_name(percpu_name: str) -> str:
    """The global tprof statistic that sums the per-CPU ``percpu_name``."""
    return _GLOBAL_NAME.get(percpu_name, percpu_name)


def applicable_oracles(run: TprofRun) -> frozenset[str]:
    """Names of the oracles `check_tprof` evaluates for ``run`` (`LAWS`: ``_APPLIES``)."""
    return LAWS.applicable(run)


def check_tprof(run: TprofRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `TPROF_ORACLES` order.

    :raise ConfigError: the run's flavour is not tprof (these are tprof's oracles).
    """
    return LAWS.check(run)


def judge_tprof(run: TprofRun) -> list[Judged]:
    """What each oracle of the table compared in ``run`` (its own laws': `compared`)."""
    return LAWS.judge(run)


def core_view(run: TprofRun) -> CoreView:
    """What the shared oracles (`harness.agent.oracles.core`) read of a tprof run."""
    return core_view_of(run, run.counters.core, throttling_disabled=run.throttling_disabled)


def check_conservation(run: TprofRun) -> list[Violation]:
    """TP-O1: per CPU, producer calls = recorded + drops + current (TP-L1).

    Also the TP-D1 quirk rule, and the injected counts when the harness injected.
    """
    law = "TP-L1: every call ends in one outcome"
    per_cpu = [
        violation
        for cpu in sorted(run.counters.core)
        for violation in sums_to(
            "TP-O1",
            cpu,
            ("x_producer_calls", _core(run, cpu, "x_producer_calls")),
            {name: _percpu(run, cpu, name) for name in (*OUTCOMES, *_CURRENT)},
            law,
        )
    ]
    return [*per_cpu, *_quirk_rule(run), *_injection(run)]


def _quirk_rule(run: TprofRun) -> list[Violation]:
    names: tuple[str, ...]
    if run.spec.quirks & _TP_D1:
        names = ("x_overflow_dropbuf", "x_overflow_emptybuf")
        detail = "quirk TP-D1 loses this overflow into x_quirk_lost"
    else:
        names, detail = ("x_quirk_lost",), "without quirk TP-D1 no overflow is lost"
    return [
        v for name in names for v in zero("TP-O1", None, name, got=_stat(run, name), detail=detail)
    ]


def _injection(run: TprofRun) -> list[Violation]:
    injected = run.injected
    if injected is None:
        return []
    names: tuple[str, ...]
    if run.spec.pmu_produce:
        names, detail = ("x_injected",), "the core counts exactly the injected calls"
    else:
        names = ("x_injected", "x_producer_calls")
        detail = "with pmu_produce off only injected calls reach the producer"
    return [
        violation
        for cpu in sorted(set(run.counters.core) | set(injected))
        for violation in all_equal(
            "TP-O1",
            cpu,
            (
                Law(
                    name,
                    injected.get(cpu, 0),
                    _core(run, cpu, name),
                    f"{injected.get(cpu, 0)} (injected)",
                )
                for name in names
            ),
            detail,
        )
    ]


def check_swaps(run: TprofRun) -> list[Violation]:
    """TP-O2: every swap classified once, and as many swaps as the drain mode makes.

    Manual drain (``run.kicks`` set): ``x_swaps = ncpu × (kicks + 2)``. Auto drain:
    ``x_swaps ≤ ncpu × (2 + ceil(runtime / drain period))`` (the floor is gone: see
    the module docstring). Returns [] when neither applies (no kicks, no run time).
    """
    if run.kicks is None and run.runtime_s <= 0:
        return []
    swaps = _stat(run, "x_swaps")
    classified = {name: _stat(run, name) for name in ("buf", "emptybuf", "dropbuf")}
    out = sums_to(
        "TP-O2",
        None,
        ("x_swaps", swaps),
        classified,
        "TP-L3: each swap queues, drops or frees a buffer",
    )
    ncpu = len(run.online_cpus)
    if run.kicks is not None:
        want = ncpu * (run.kicks + 2)
        text = f"{ncpu} × ({run.kicks} + 2) = {want}"
        detail = "one swap per CPU at START, per kick and at STOP"
        return out + all_equal("TP-O2", None, (Law("x_swaps", want, swaps, text),), detail)
    periods = math.ceil(run.runtime_s * 1000 / run.spec.drain_ms)
    detail = f"{ncpu} CPUs, {run.runtime_s:g} s, one drain per {run.spec.drain_ms} ms"
    return out + at_most(
        "TP-O2", None, "x_swaps", bound=ncpu * (2 + periods), got=swaps, detail=detail
    )


def check_read(run: TprofRun) -> list[Violation]:
    """TP-O5: the stream holds exactly the recorded samples, per CPU, from online CPUs."""
    sample, size = _stat(run, "sample"), TPROF.record.size
    want = f"{size} × sample {sample} = {size * sample}"
    counts = Counter(s.cpu for s in run.samples)
    totals = (
        Law("bytes_read", size * sample, run.bytes_read, want),
        Law("x_bytes_read", size * sample, _stat(run, "x_bytes_read"), want),
        Law("records", sample, len(run.samples), f"sample = {sample}"),
    )
    unfilled = sum(1 for s in run.samples if s.pc == 0)
    online = ",".join(map(str, sorted(run.online_cpus)))
    out = zero(
        "TP-O5",
        None,
        "records with pc 0",
        got=unfilled,
        detail="an interrupted PC is never 0: the record was published unfilled",
    )
    out += all_equal("TP-O5", None, totals, "TP-L4: after STOP, read to EOF")
    for cpu in sorted(set(counts) | set(run.counters.stats_percpu)):
        recorded = _percpu(run, cpu, "x_sample")
        law = Law("records", recorded, counts[cpu], f"x_sample = {recorded}")
        out += all_equal("TP-O5", cpu, (law,), "records whose cpu field is this CPU")
    for cpu in sorted(set(counts) - set(run.online_cpus)):
        out += zero(
            "TP-O5", cpu, "records", got=counts[cpu], detail=f"a CPU not online (online: {online})"
        )
    return out


def check_placement(run: TprofRun) -> list[Violation]:
    """PLACE: each busy CPU overflowed and its pinned loops were sampled there only.

    A sample must show its loop where it ran only when the PMU produced samples and no
    buffer was dropped; a PID listed on several CPUs may show on any of them. "There
    only" judges the samples in the loop itself (``run.spin_loop``, entered once the
    child is pinned): a loop for the isolated CPU is forked where profctl runs and
    pins itself, and its start is sampled there (CI, a loaded host: 6 samples on
    CPUs 0 and 1 of the loop of CPU 7). Where the loop's code is not known, every
    sample of its pid is judged.
    """
    homes: dict[int, set[int]] = {}
    for cpu, pids in run.busy.items():
        for pid in pids:
            homes.setdefault(pid, set()).add(cpu)
    must_see = run.spec.pmu_produce and _stat(run, "dropbuf") == 0
    out: list[Violation] = []
    for cpu, pids in sorted(run.busy.items()):
        names = "pids " + ",".join(map(str, pids))
        out += at_least(
            "PLACE",
            cpu,
            "x_nmi_total",
            bound=1,
            got=_core(run, cpu, "x_nmi_total"),
            detail="a busy CPU raised no overflow",
        )
        here = sum(1 for s in run.samples if s.cpu == cpu and s.pid in pids)
        if must_see:
            out += at_least(
                "PLACE",
                cpu,
                f"samples of {names}",
                bound=1,
                got=here,
                detail="busy loop never sampled",
            )
        low, high = run.spin_loop
        looping = [s for s in run.samples if s.pid in pids
                   and (high == 0 or (not s.in_kernel and low <= s.pc < high))]  # fmt: skip
        away = Counter(s.cpu for s in looping if s.cpu not in homes[s.pid])
        where = ", ".join(f"CPU {c}: {n}" for c, n in sorted(away.items()))
        out += zero(
            "PLACE",
            cpu,
            f"samples of {names} elsewhere",
            got=away.total(),
            detail=f"the busy loops were pinned; seen on {where}",
        )
    return out


def check_probe(run: TprofRun) -> list[Violation]:
    """PROBE: probe windows ran; overflows landed inside them iff pseudo-NMI is on."""
    out: list[Violation] = []
    for cpu in sorted(run.probe_cpus):
        runs = _core(run, cpu, "x_probe_runs")
        out += at_least(
            "PROBE", cpu, "x_probe_runs", bound=1, got=runs, detail="the probe never ran"
        )
        if run.nmi_expected:
            out += at_least(
                "PROBE",
                cpu,
                "x_probe_hits",
                bound=1,
                got=_core(run, cpu, "x_probe_hits"),
                detail=f"pseudo-NMI on: overflows land inside {runs} IRQ-off windows",
            )
    if not run.nmi_expected:
        detail = "pseudo-NMI off: IRQ-off windows cannot be sampled"
        out += [v for cpu in sorted(run.counters.core)
                for v in zero("PROBE", cpu, "x_probe_hits", got=_core(run, cpu, "x_probe_hits"),
                              detail=detail)]  # fmt: skip
    return out


def check_stopped(run: TprofRun) -> list[Violation]:
    """STOPPED: the counters, read after STOP, find no CPU holding a current buffer.

    STOP's final swaps and its free of the offline CPUs' buffers leave none. A kick that
    passed its running check before STOP and swapped after it (tp_swap no longer
    refusing it: issue 10's fix, mutant ``kick_after_stop``, window opened by the
    ``stop_kick`` run) installs a buffer nothing frees: a leak, which KASAN does not see.
    """
    got = int(run.counters.state.get("cur_buffers", "0"))
    detail = "STOP frees every current buffer; one after it was installed late"
    return zero("STOPPED", None, "cur_buffers", got=got, detail=detail)


def check_online(run: TprofRun) -> list[Violation]:
    """ONLINE: no producer call found its CPU without a current buffer (x_nobuf = 0).

    An exact law of the fixed port: START installs a buffer on every possible CPU before
    any source is armed, an outgoing CPU is disarmed before its final swap, and the core
    calls a CPU's flavour set-up before it arms the CPU coming online (issue 10's fix;
    mutant ``online_arm_first``, window opened by the ``online`` run).
    """
    detail = "a producer call on a CPU armed before its buffer"
    return [
        violation
        for cpu in sorted(run.counters.core)
        for violation in zero(
            "ONLINE", cpu, "x_nobuf", got=_percpu(run, cpu, "x_nobuf"), detail=detail
        )
    ]


_CHECKS: dict[str, Callable[[TprofRun], list[Violation]]] = {
    "TP-O1": check_conservation,
    "TP-O2": check_swaps,
    "TP-O5": check_read,
    "PLACE": check_placement,
    "NMI": check_nmi,
    "PROBE": check_probe,
    "TP-O10": check_stop_latency,
    "STOPPED": check_stopped,
    "ONLINE": check_online,
}


#: When a law applies (the others always do). TP-O2 needs kicks (manual drain) or a run
#: time (auto drain): a manual-drain run without a kick count (hotplug adds swaps) skips
#: it. PLACE needs busy loops, PROBE probe CPUs (a run without them has no IRQ-off
#: window to judge). TP-O10 (like the core's C-3) needs a guest clock that counts
#: instructions: wall-clock budgets would flake under TCG (`budgets`). STOPPED needs a
#: module that prints ``cur_buffers`` (one from before it did skips it).
_APPLIES: dict[str, Callable[[TprofRun], bool]] = {
    "TP-O2": lambda run: run.kicks is not None or (run.spec.drain == "auto" and run.runtime_s > 0),
    "PLACE": lambda run: bool(run.busy),
    "PROBE": lambda run: bool(run.probe_cpus),
    "TP-O10": lambda run: run.instruction_clock,
    "STOPPED": lambda run: "cur_buffers" in run.counters.state,
}
LAWS = Laws(name=TPROF.name, oracles=_OWN, checks=_CHECKS, compared=compared_tprof,
            core=core_view, applies=_APPLIES)  # fmt: skip


def _core(run: TprofRun, cpu: int, name: str) -> int:
    return run.counters.core.get(cpu, {}).get(name, 0)


def _percpu(run: TprofRun, cpu: int, name: str) -> int:
    return run.counters.stats_percpu.get(cpu, {}).get(name, 0)


def _stat(run: TprofRun, name: str) -> int:
    return run.counters.stats.get(name, 0)
