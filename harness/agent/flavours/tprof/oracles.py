"""The tprof oracles of seeds-spec §7.1 and §7 (common), as pure checks on one run.

Each ``check_*`` takes a `SamplingRun` and returns every way the run breaks its law,
as readable `Violation` values (an empty list means pass); `check_sampling` runs
every applicable one, so a failed law never hides the others::

    violations = check_sampling(run)
    {v.oracle for v in violations}      # {"TP-O1", "THROTTLE"}
    for name, description in ORACLES:   # report order
        ...

A statistic missing from the snapshot reads as 0: the parsers guarantee every name
of the flavour's data, and a hole there shows up as a broken law here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeAlias

from harness.agent.flavours.tprof.data import TPROF, TPROF_DROP_CAUSES
from harness.agent.flavours.tprof.results import SamplingRun
from harness.agent.results import Violation
from harness.errors import ConfigError

#: Oracle names and one-line descriptions, in report order.
ORACLES: tuple[tuple[str, str], ...] = (
    ("TP-O1", "conservation: every producer call is recorded, dropped with a cause or current"),
    ("TP-O2", "swaps: buf + emptybuf + dropbuf = x_swaps = ncpu × (kicks + 2), or auto bounds"),
    ("TP-O5", "read completeness: bytes and records read = sample, per CPU, online CPUs only"),
    ("COUNT", "overflows seen agree with the sampling counter's value ÷ period"),
    ("PLACE", "samples land on the CPUs where the pinned workload ran"),
    ("NMI", "producer context matches the pseudo-NMI mode the guest booted with"),
    ("PROBE", "overflows land inside IRQ-off probe windows iff pseudo-NMI is on"),
    ("THROTTLE", "overflows missing against the time enabled are counted as throttled"),
    ("C-2", "no lock taken and no allocation made in NMI context"),
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
    names = {name for name, _ in ORACLES}
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
    return [v for name, _ in ORACLES if name in applicable for v in _CHECKS[name](run)]


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
    return [
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


def check_counts(run: SamplingRun) -> list[Violation]:
    """COUNT: overflows seen + periods merged = counter value ÷ period, per event lifetime.

    ``x_pmu_merged`` counts periods that ended without an overflow of their own
    (the overflow was handled more than a period late), so nothing is missing.
    """

    def per_cpu(cpu: int) -> Finding:
        events = _core(run, cpu, "x_events_created")
        seen = _core(run, cpu, "x_nmi_total")
        merged = _core(run, cpu, "x_pmu_merged")
        periods = _core(run, cpu, "x_counter_value") // run.spec.period
        if events <= 0 or abs(seen + merged - periods) <= events:
            return None
        return (
            f"|x_nmi_total + x_pmu_merged - x_counter_value ÷ period| ≤ {events}",
            f"|{seen} + {merged} - {periods}| = {abs(seen + merged - periods)}",
        )

    detail = "one partial period per event lifetime"
    return _per_cpu("COUNT", run.snapshot.core, detail, per_cpu)


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
    """NMI: with pseudo-NMI on every producer call ran in NMI; with it off none did."""
    if not run.nmi_expected:
        names = ("x_nmi_ctx_ok", "x_producer_calls_nmi", "x_irqoff_samples")
        return _must_be_zero(run, "NMI", names, "pseudo-NMI off: nothing runs in NMI")

    def per_cpu(cpu: int) -> Finding:
        calls, nmi = _core(run, cpu, "x_producer_calls"), _core(run, cpu, "x_producer_calls_nmi")
        if nmi == calls:
            return None
        irq = _core(run, cpu, "x_producer_calls_irq")
        task = _core(run, cpu, "x_producer_calls_task")
        return (
            f"x_producer_calls_nmi = x_producer_calls = {calls}",
            f"x_producer_calls_nmi = {nmi} (irq {irq}, task {task})",
        )

    none_ok = not any(_core(run, cpu, "x_nmi_ctx_ok") > 0 for cpu in run.snapshot.core)
    expected, observed = "x_nmi_ctx_ok > 0 on some CPU", "x_nmi_ctx_ok = 0 on every CPU"
    return [
        *_must_be_zero(run, "NMI", ("x_nmi_ctx_bad",), "pseudo-NMI on: handled outside NMI"),
        *_per_cpu("NMI", run.snapshot.core, "pseudo-NMI on: every call in NMI", per_cpu),
        *([Violation("NMI", None, expected, observed, "pseudo-NMI on")] if none_ok else []),
    ]


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


def throttle_lost(run: SamplingRun) -> dict[int, int]:
    """Per CPU, periods the sampling counter missed against its enabled time (≥ 0).

    A throttled event stays enabled but stops counting, so the time says how
    many events were due: ``(x_enabled_ns × events per ns - x_counter_value)
    // period``; 0 on CPUs that never had an event.
    """
    return {cpu: max(0, _lost(run, cpu)) for cpu in sorted(run.snapshot.core)}


def check_throttle(run: SamplingRun) -> list[Violation]:
    """THROTTLE: overflows missing against the time enabled are counted, never silent.

    With throttling disabled nothing is throttled and the two counters agree
    within `_skew_bound` (they are created and released one after the other).
    """

    def per_cpu(cpu: int) -> Finding:
        bound, lost = _skew_bound(run, cpu), _lost(run, cpu)
        if lost <= bound:
            return None
        text = f"lost = (due by x_enabled_ns - x_counter_value) ÷ period = {lost}"
        if run.throttling_disabled:
            return f"lost ≤ {bound}", text
        if _core(run, cpu, "x_throttled") == 0:
            return f"x_throttled > 0 ({text} > {bound})", "x_throttled = 0"
        return None

    detail = "throttling disabled" if run.throttling_disabled else "a loss must be counted"
    zero = _must_be_zero(run, "THROTTLE", ("x_throttled",), detail)
    return [
        *(zero if run.throttling_disabled else []),
        *_per_cpu("THROTTLE", run.snapshot.core, detail, per_cpu),
    ]


def check_nmi_safety(run: SamplingRun) -> list[Violation]:
    """C-2: no lock taken and no allocation made in NMI context, on any CPU."""
    names = ("x_nmi_lock_violation", "x_nmi_alloc_violation")
    return _must_be_zero(run, "C-2", names, "NMI context must not lock or allocate")


#: Events the count may lag the enabled time by without throttling (see _skew_bound).
SKEW_EVENTS = 50_000_000

_CHECKS: dict[str, Callable[[SamplingRun], list[Violation]]] = {
    "TP-O1": check_conservation,
    "TP-O2": check_swaps,
    "TP-O5": check_read,
    "COUNT": check_counts,
    "PLACE": check_placement,
    "NMI": check_nmi_context,
    "PROBE": check_probe,
    "THROTTLE": check_throttle,
    "C-2": check_nmi_safety,
}


def _core(run: SamplingRun, cpu: int, name: str) -> int:
    return run.snapshot.core.get(cpu, {}).get(name, 0)


def _percpu(run: SamplingRun, cpu: int, name: str) -> int:
    return run.snapshot.stats_percpu.get(cpu, {}).get(name, 0)


def _percpu_sum(run: SamplingRun, name: str) -> int:
    return sum(_percpu(run, cpu, name) for cpu in run.snapshot.stats_percpu)


def _stat(run: SamplingRun, name: str) -> int:
    return run.snapshot.stats.get(name, 0)


def _due(run: SamplingRun, cpu: int) -> int | None:
    """Events due on ``cpu`` by its events' enabled time, or None if the rate is unknown."""
    ns = _core(run, cpu, "x_enabled_ns")
    if run.spec.event == "cpu-clock":  # the sampling event counts nanoseconds itself
        return ns
    if run.ref_events_per_ns is None:
        return None
    return int(ns * run.ref_events_per_ns)


def _lost(run: SamplingRun, cpu: int) -> int:
    """Periods due by the enabled time but not counted by the sampling counter; 0 if unknown."""
    due = _due(run, cpu)
    if due is None or _core(run, cpu, "x_events_created") <= 0:
        return 0
    return (due - _core(run, cpu, "x_counter_value")) // run.spec.period


def _skew_bound(run: SamplingRun, cpu: int) -> int:
    """How far the two counters may differ without throttling, in periods.

    The enabled time and the count are the same event's, but the driver stops
    the counter while it handles an overflow or reprograms the PMU, and under
    TCG that takes long: 8 vCPUs on 2 host cores showed up to 25 ms of enabled
    time without cycles. Allow 50 ms of events (QEMU counts cycles at 1 GHz),
    10 % of the periods due, and at least 2 per event lifetime, whichever is
    most; throttling loses far more (the throttling test: most of them).
    """
    due = (_due(run, cpu) or 0) // run.spec.period
    events = _core(run, cpu, "x_events_created")
    return max(2 * events, due // 10, SKEW_EVENTS // run.spec.period)


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
