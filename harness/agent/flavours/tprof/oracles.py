"""The tprof oracles of seeds-spec §7.1 and §7 (common), as pure checks on one run.

Each ``check_*`` takes a `SamplingRun` and returns every way the run breaks its law,
as readable `Violation` values (an empty list means pass); `check_sampling` runs
every applicable one, so a failed law never hides the others::

    violations = check_sampling(run)
    {v.oracle for v in violations}      # {"TP-O1", "THROTTLE"}
    for name, description in ORACLES:   # report order
        ...

The shared oracles (IRQ, CALLS, RELEASED, THROTTLE, C-2 in
`harness.agent.core_oracles`) run first: they tie the producer calls TP-O1 starts
from to the kernel's own interrupt count and to the injections the harness sent.
The parsers guarantee every counter name of the flavour's data is present.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeAlias

from harness.agent.core_oracles import CORE_ORACLES, CoreView, applicable_core, check_core
from harness.agent.core_oracles import check_nmi_context as nmi_context
from harness.agent.flavours.tprof.data import TPROF, TPROF_DROP_CAUSES
from harness.agent.flavours.tprof.results import SamplingRun
from harness.agent.peer import PeerBound, agent_window
from harness.agent.results import Violation
from harness.errors import ConfigError

#: Oracle names and one-line descriptions, in report order.
ORACLES: tuple[tuple[str, str], ...] = (
    *CORE_ORACLES,
    ("TP-O1", "conservation: every producer call is recorded, dropped with a cause or current"),
    ("TP-O2", "swaps: buf + emptybuf + dropbuf = x_swaps = ncpu × (kicks + 2), or auto bounds"),
    ("TP-O5", "read completeness: records read = sample per CPU, every one filled, online CPUs"),
    ("PLACE", "samples land on the CPUs where the pinned workload ran"),
    ("NMI", "producer context matches the pseudo-NMI mode the guest booted with"),
    ("PROBE", "overflows land inside IRQ-off probe windows iff pseudo-NMI is on"),
)

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
_SUMMED = "a global statistic equals the sum of its per-CPU counts"

#: (expected, observed) when a law is broken, None when it holds.
Finding: TypeAlias = tuple[str, str] | None


def global_name(percpu_name: str) -> str:
    """The global tprof statistic that sums the per-CPU ``percpu_name``."""
    return _GLOBAL_NAME.get(percpu_name, percpu_name)


def applicable_oracles(run: SamplingRun) -> frozenset[str]:
    """Names of the oracles `check_sampling` evaluates for ``run``.

    TP-O2 needs kicks (manual drain) or a run time (auto drain): a manual-drain run
    without a kick count (hotplug adds swaps) skips it. PLACE needs busy loops.
    """
    core = {name for name, _ in CORE_ORACLES}
    names = {name for name, _ in ORACLES} - core | applicable_core(core_view(run))
    if run.kicks is None and (run.spec.drain != "auto" or run.runtime_s <= 0):
        names.discard("TP-O2")
    if not run.busy:
        names.discard("PLACE")
    return frozenset(names)


def check_sampling(run: SamplingRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `ORACLES` order.

    :raise ConfigError: the run's flavour is not tprof (these are tprof's oracles).
    """
    if run.spec.flavour != TPROF.name:
        raise ConfigError(
            f"check_sampling holds tprof's oracles; the run's flavour is {run.spec.flavour!r}"
        )
    applicable = applicable_oracles(run)
    own = [v for name, _ in ORACLES if name in applicable and name in _CHECKS
           for v in _CHECKS[name](run)]  # fmt: skip
    return [*check_core(core_view(run)), *own]


def core_view(run: SamplingRun) -> CoreView:
    """What the shared oracles (`harness.agent.core_oracles`) read of a tprof run."""
    bound = (
        agent_window(run.snapshot.info, run.spec.period)[1] if run.peer is not None else PeerBound()
    )
    return CoreView(spec=run.spec, core=run.snapshot.core, kernel=run.kernel,
                    injections=run.injections, throttling_disabled=run.throttling_disabled,
                    peer=run.peer, peer_bound=bound)  # fmt: skip


def check_conservation(run: SamplingRun) -> list[Violation]:
    """TP-O1: per CPU and globally, producer calls = recorded + drops + current.

    Also: global stats equal the per-CPU sums, the TP-D1 quirk rule, and the
    injected counts when the harness injected.
    """

    def per_cpu(cpu: int) -> Finding:
        calls = _core(run, cpu, "x_producer_calls")
        terms = [(name, _percpu(run, cpu, name)) for name in (*OUTCOMES, *_CURRENT)]
        return _unequal(f"x_producer_calls = {calls}", calls, terms)

    calls = sum(_core(run, cpu, "x_producer_calls") for cpu in run.snapshot.core)
    terms = [(global_name(name), _stat(run, global_name(name))) for name in OUTCOMES]
    terms += [(f"Σ {name}", _percpu_sum(run, name)) for name in _CURRENT]
    found = _unequal(f"Σ x_producer_calls = {calls}", calls, terms)
    law = "TP-L2: the global statistics account for every producer call"
    return [
        *_per_cpu("TP-O1", run.snapshot.core, "TP-L1: every call ends in one outcome", per_cpu),
        *([Violation("TP-O1", None, *found, law)] if found else []),
        *_sums_match(run),
        *_quirk_rule(run),
        *_injection(run),
    ]


def _sums_match(run: SamplingRun) -> list[Violation]:
    sums = {name: (_percpu_sum(run, name), global_name(name)) for name in (*OUTCOMES, "x_swaps")}
    return [
        Violation("TP-O1", None, f"Σ_c {name} = {total}", f"{stat} = {_stat(run, stat)}", _SUMMED)
        for name, (total, stat) in sums.items()
        if total != _stat(run, stat)
    ]


def _quirk_rule(run: SamplingRun) -> list[Violation]:
    names: tuple[str, ...]
    if run.spec.quirks & _TP_D1:
        names = ("x_overflow_dropbuf", "x_overflow_emptybuf")
        detail = "quirk TP-D1 loses this overflow into x_quirk_lost"
    else:
        names, detail = ("x_quirk_lost",), "without quirk TP-D1 no overflow is lost"
    return [
        Violation("TP-O1", None, f"{name} = 0", f"{name} = {_stat(run, name)}", detail)
        for name in names
        if _stat(run, name) != 0
    ]


def _injection(run: SamplingRun) -> list[Violation]:
    injected = run.injected
    if injected is None:
        return []
    names = ("x_injected",) if run.spec.pmu_produce else ("x_injected", "x_producer_calls")
    return [
        Violation(
            "TP-O1",
            cpu,
            f"{name} = {injected.get(cpu, 0)} (injected)",
            f"{name} = {_core(run, cpu, name)}",
            "the core counts exactly the injected calls"
            if name == "x_injected"
            else "with pmu_produce off only injected samples reach the producer",
        )
        for cpu in sorted(set(run.snapshot.core) | set(injected))
        for name in names
        if _core(run, cpu, name) != injected.get(cpu, 0)
    ]


def check_swaps(run: SamplingRun) -> list[Violation]:
    """TP-O2: every swap classified once, and as many swaps as the drain mode makes.

    Manual drain (``run.kicks`` set): ``x_swaps = ncpu × (kicks + 2)``. Auto drain:
    ``2·ncpu ≤ x_swaps ≤ ncpu × (2 + ceil(runtime / drain period))``. Returns [] when
    neither applies (no kicks and no run time).
    """
    if run.kicks is None and run.runtime_s <= 0:
        return []
    swaps = _stat(run, "x_swaps")
    terms = [(name, _stat(run, name)) for name in ("buf", "emptybuf", "dropbuf")]
    found = _unequal(f"x_swaps = {swaps}", swaps, terms)
    violations = (
        [Violation("TP-O2", None, *found, "TP-L3: each swap queues, drops or frees a buffer")]
        if found
        else []
    )
    ncpu = len(run.online_cpus)
    if run.kicks is not None:
        want = ncpu * (run.kicks + 2)
        expected, ok = f"x_swaps = {ncpu} × ({run.kicks} + 2) = {want}", swaps == want
        detail = "one swap per CPU at START, per kick and at STOP"
    else:
        periods = math.ceil(run.runtime_s * 1000 / run.spec.drain_ms)
        low, high = 2 * ncpu, ncpu * (2 + periods)
        expected, ok = f"{low} ≤ x_swaps ≤ {high}", low <= swaps <= high
        detail = f"{ncpu} CPUs, {run.runtime_s:g} s, one drain per {run.spec.drain_ms} ms"
    if not ok:
        violations.append(Violation("TP-O2", None, expected, f"x_swaps = {swaps}", detail))
    return violations


def check_read(run: SamplingRun) -> list[Violation]:
    """TP-O5: the stream holds exactly the recorded samples, per CPU, from online CPUs."""
    sample, size = _stat(run, "sample"), TPROF.record.size
    want = f"{size} × sample {sample} = {size * sample}"
    counts = Counter(s.cpu for s in run.samples)
    totals = (
        ("bytes_read", want, run.bytes_read, size * sample),
        ("x_bytes_read", want, _stat(run, "x_bytes_read"), size * sample),
        ("records", f"sample = {sample}", len(run.samples), sample),
    )

    def per_cpu(cpu: int) -> Finding:
        recorded = _percpu(run, cpu, "x_sample")
        if counts[cpu] == recorded:
            return None
        return f"records = x_sample = {recorded}", f"records = {counts[cpu]}"

    online, law = ",".join(map(str, sorted(run.online_cpus))), "TP-L4: after STOP, read to EOF"
    unfilled = sum(1 for s in run.samples if s.pc == 0)
    return [
        *(
            [
                Violation(
                    "TP-O5",
                    None,
                    "every record filled (pc ≠ 0)",
                    f"{unfilled} with pc = 0",
                    "an interrupted PC is never 0: the record was published unfilled",
                )
            ]
            if unfilled
            else []
        ),
        *(
            Violation("TP-O5", None, f"{name} = {text}", f"{name} = {got}", law)
            for name, text, got, wanted in totals
            if got != wanted
        ),
        *_per_cpu(
            "TP-O5",
            set(counts) | set(run.snapshot.stats_percpu),
            "records whose cpu field is this CPU",
            per_cpu,
        ),
        *(
            Violation(
                "TP-O5", cpu, f"cpu in {online}", f"{counts[cpu]} records", "a CPU not online"
            )
            for cpu in sorted(set(counts) - set(run.online_cpus))
        ),
    ]


def check_placement(run: SamplingRun) -> list[Violation]:
    """PLACE: each busy CPU overflowed and its pinned loops were sampled there only.

    A sample must show its loop where it ran only when the PMU produced samples and no
    buffer was dropped; a PID listed on several CPUs may show on any of them.
    """
    homes: dict[int, set[int]] = {}
    for cpu, pids in run.busy.items():
        for pid in pids:
            homes.setdefault(pid, set()).add(cpu)
    must_see = run.spec.pmu_produce and _stat(run, "dropbuf") == 0
    violations = []
    for cpu, pids in sorted(run.busy.items()):
        names = "pids " + ",".join(map(str, pids))
        if _core(run, cpu, "x_nmi_total") == 0:
            violations.append(
                Violation(
                    "PLACE",
                    cpu,
                    "x_nmi_total > 0",
                    "x_nmi_total = 0",
                    "a busy CPU raised no overflow",
                )
            )
        here = sum(1 for s in run.samples if s.cpu == cpu and s.pid in pids)
        if must_see and here == 0:
            violations.append(
                Violation("PLACE", cpu, f"≥ 1 sample of {names}", "0", "busy loop never sampled")
            )
        away = Counter(s.cpu for s in run.samples if s.pid in pids and s.cpu not in homes[s.pid])
        if away:
            where = ", ".join(f"CPU {c}: {n}" for c, n in sorted(away.items()))
            expected, observed = f"0 samples of {names} elsewhere", f"{away.total()} ({where})"
            violations.append(
                Violation("PLACE", cpu, expected, observed, "the busy loops were pinned")
            )
    return violations


def check_nmi_context(run: SamplingRun) -> list[Violation]:
    """NMI: `harness.agent.core_oracles.check_nmi_context` on the run's core counters."""
    return nmi_context(run.snapshot.core, run.nmi_expected)


def check_probe(run: SamplingRun) -> list[Violation]:
    """PROBE: probe windows ran; overflows landed inside them iff pseudo-NMI is on."""
    violations = [
        Violation("PROBE", cpu, "x_probe_runs > 0", "x_probe_runs = 0", "the probe never ran")
        for cpu in sorted(run.probe_cpus)
        if _core(run, cpu, "x_probe_runs") == 0
    ]
    if not run.nmi_expected:
        detail = "pseudo-NMI off: IRQ-off windows cannot be sampled"
        return violations + _must_be_zero(run, "PROBE", ("x_probe_hits",), detail)
    return violations + [
        Violation(
            "PROBE",
            cpu,
            "x_probe_hits > 0",
            f"x_probe_hits = 0 in {_core(run, cpu, 'x_probe_runs')} runs",
            "pseudo-NMI on: overflows land inside IRQ-off windows",
        )
        for cpu in sorted(run.probe_cpus)
        if _core(run, cpu, "x_probe_hits") == 0
    ]


_CHECKS: dict[str, Callable[[SamplingRun], list[Violation]]] = {
    "TP-O1": check_conservation,
    "TP-O2": check_swaps,
    "TP-O5": check_read,
    "PLACE": check_placement,
    "NMI": check_nmi_context,
    "PROBE": check_probe,
}


def _core(run: SamplingRun, cpu: int, name: str) -> int:
    return run.snapshot.core.get(cpu, {}).get(name, 0)


def _percpu(run: SamplingRun, cpu: int, name: str) -> int:
    return run.snapshot.stats_percpu.get(cpu, {}).get(name, 0)


def _percpu_sum(run: SamplingRun, name: str) -> int:
    return sum(_percpu(run, cpu, name) for cpu in run.snapshot.stats_percpu)


def _stat(run: SamplingRun, name: str) -> int:
    return run.snapshot.stats.get(name, 0)


def _per_cpu(
    oracle: str, cpus: Iterable[int], detail: str, judge: Callable[[int], Finding]
) -> list[Violation]:
    found = [(cpu, judge(cpu)) for cpu in sorted(cpus)]
    return [Violation(oracle, cpu, *finding, detail) for cpu, finding in found if finding]


def _must_be_zero(
    run: SamplingRun, oracle: str, names: tuple[str, ...], detail: str
) -> list[Violation]:
    return [
        Violation(oracle, cpu, f"{name} = 0", f"{name} = {_core(run, cpu, name)}", detail)
        for cpu in sorted(run.snapshot.core)
        for name in names
        if _core(run, cpu, name) != 0
    ]


def _unequal(expected: str, want: int, terms: Iterable[tuple[str, int]]) -> Finding:
    """``(expected, "x_sample 16 + x_overflow 8 = 24")`` when the terms do not sum to want."""
    nonzero = [(name, n) for name, n in terms if n]
    total = sum(n for _, n in nonzero)
    if total == want:
        return None
    text = " + ".join(f"{name} {n}" for name, n in nonzero) if nonzero else "every term 0"
    return expected, f"{text} = {total}"
