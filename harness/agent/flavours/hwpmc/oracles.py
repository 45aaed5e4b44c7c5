"""The hwpmc oracles of seeds-spec §7.4 (HW-O1 … HW-O10), as pure checks on one run.

Each ``check_*`` takes an `HwRun` and returns every way the run breaks its law as
readable `Violation` values; `check_hwpmc` runs every applicable one::

    violations = check_hwpmc(run)
    {v.oracle for v in violations}        # {"HW-O6"} for HW-D1 on 40 vCPUs

The shared oracles (IRQ, CALLS, RELEASED, …) run first: they tie the producer calls
HW-O1 starts from to the kernel's own interrupt count and the injections sent.
HW-O4, HW-O5 and HW-O8 compare with what the harness injected or ran, HW-O9 with the
errors §4.4 prescribes and the calls the harness made, HW-O10 with the PMC ids the
harness allocated; none balances with a number the agent derived from the one checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from harness.agent.core_oracles import CORE_ORACLES, CoreView, applicable_core, check_core
from harness.agent.core_oracles import check_nmi_context as nmi_context
from harness.agent.flavours.hwpmc.data import PMC_MODES
from harness.agent.flavours.hwpmc.results import HwRun, Table
from harness.agent.results import Violation

HW_ORACLES: tuple[tuple[str, str], ...] = (
    *CORE_ORACLES,
    ("HW-O1", "producer calls = ignored + recorded + bufferfull + stalled NMIs, sums match"),
    ("HW-O2", "recorded = swept + in ring, 0 ≤ in ring ≤ nsamples"),
    ("HW-O3", "swept = logged + log failed + discarded; the log holds every logged record"),
    ("HW-O4", "exact fill: min(N, n) recorded, the rest bufferfull; one stall per restart"),
    ("HW-O5", "a sweep with progress empties the ring and restarts; sampling resumes"),
    ("HW-O6", "at quiescence every CPU's ring is empty; every recording CPU was swept"),
    ("HW-O7", "runcount 0 after STOP and sweeps; RELEASE: 1 sweep tick per CPU; no stray NMI"),
    ("HW-O8", "stall state per (PMC, CPU): A stays stalled while B sweeps, then restarts"),
    ("HW-O9", "every op gives its §4.4 errno; syscalls and syscall_errors counted exactly"),
    ("HW-O10", "log records: seq 1..N, producing CPU, user flag, pid, depth 1"),
    ("HW-SC", "an SC PMC counts its CPU's cycles from START to STOP, then holds its value"),
    ("NMI", "producer calls in NMI context iff the guest booted with pseudo-NMI"),
)
KERNEL_PC = 1 << 63  # arm64 and x86-64 kernel addresses have the top bit set
PID_NONE = 0xFFFFFFFF
# A RELEASE's entries are freed by each CPU's first sweep tick after it began (fixed
# mode: every recording CPU is marked, nothing pending, the timer sweeps the whole
# ring). The agent counts those ticks on each CPU's own timer, so a host that delays
# the releasing thread or the vCPU cannot add to them; a second tick means a sweep
# skipped entries it should have freed.
RELEASE_TICKS = 1


def core_view(run: HwRun) -> CoreView:
    """What the shared oracles read of ``run``."""
    return CoreView(
        spec=run.spec,
        core=run.snapshot.core,
        kernel=run.kernel,
        injections=run.injections,
        throttling_disabled=run.throttling_disabled,
    )


def applicable_hw_oracles(run: HwRun) -> frozenset[str]:
    """The oracles `check_hwpmc` judges ``run`` by (which laws its kind exercises)."""
    names = {name for name, _ in HW_ORACLES} - {n for n, _ in CORE_ORACLES}
    names |= applicable_core(core_view(run))
    if not run.fill and not run.hardware_stall:
        names.discard("HW-O4")
    if not run.resume:
        names.discard("HW-O5")
    if run.pair is None:
        names.discard("HW-O8")
    if not run.ops:
        names.discard("HW-O9")
    if run.spec.drain != "auto":
        names.discard("HW-O6")
    if run.counting is None:
        names.discard("HW-SC")
    if run.kind == "counting":  # no sampling PMC: no producer call to judge the context of
        names.discard("NMI")
    return frozenset(names)


def check_hwpmc(run: HwRun) -> list[Violation]:
    """Every violation of every applicable oracle, in `HW_ORACLES` order."""
    applicable = applicable_hw_oracles(run)
    found = check_core(core_view(run))
    for name, check in _CHECKS.items():
        if name in applicable:
            found += check(run)
    return found


def _get(table: Table, cpu: int, name: str) -> int:
    return table.get(cpu, {}).get(name, 0)


def _total(table: Table, name: str) -> int:
    return sum(_get(table, cpu, name) for cpu in table)


def _law(
    oracle: str, cpu: int | None, expected: tuple[str, int], terms: Mapping[str, int], detail: str
) -> list[Violation]:
    """``expected`` = the sum of ``terms``; observed shows every term."""
    name, want = expected
    got = sum(terms.values())
    if got == want:
        return []
    observed = " + ".join(f"{k} {v}" for k, v in terms.items()) + f" = {got}"
    return [Violation(oracle, cpu, f"{name} = {want}", observed, detail)]


def check_interrupts(run: HwRun) -> list[Violation]:
    """HW-O1: every producer call (core count, tied to /proc/interrupts) has one outcome."""
    pc, core, stats = run.snapshot.stats_percpu, run.snapshot.core, run.snapshot.stats
    outcomes = ("x_ignored", "x_recorded", "x_bufferfull", "x_stalled_nmi")
    found: list[Violation] = []
    for cpu in sorted(core):
        terms = {name: _get(pc, cpu, name) for name in outcomes}
        found += _law(
            "HW-O1",
            cpu,
            ("x_producer_calls", _get(core, cpu, "x_producer_calls")),
            terms,
            "each producer call is ignored, recorded, bufferfull or stalled",
        )
        if run.hardware_stall and terms["x_stalled_nmi"]:
            found.append(
                Violation(
                    "HW-O1",
                    cpu,
                    "x_stalled_nmi = 0",
                    f"x_stalled_nmi = {terms['x_stalled_nmi']}",
                    "a stopped counter raises no NMI",
                )
            )
    sums = (
        ("intr_bufferfull", ("x_bufferfull",)),
        ("intr_ignored", ("x_ignored",)),
        ("intr_processed", ("x_recorded", "x_bufferfull", "x_stalled_nmi")),
    )
    for stat, parts in sums:
        terms = {f"Σ {p}": _total(pc, p) for p in parts}
        found += _law("HW-O1", None, (stat, stats.get(stat, 0)), terms, "global = Σ per CPU")
    return found


def _ring_law(table: Table, n: int, when: str) -> list[Violation]:
    found: list[Violation] = []
    for cpu in sorted(table):
        terms = {"x_swept": _get(table, cpu, "x_swept"), "x_inring": _get(table, cpu, "x_inring")}
        found += _law(
            "HW-O2",
            cpu,
            ("x_recorded", _get(table, cpu, "x_recorded")),
            terms,
            f"{when}; x_inring counts the entries' states",
        )
        if terms["x_inring"] > n:
            found.append(Violation("HW-O2", cpu, f"x_inring ≤ {n}", f"{terms['x_inring']}", when))
    return found


def check_rings(run: HwRun) -> list[Violation]:
    """HW-O2 at every table the run read: mid-run, after STOP, after RELEASE."""
    tables = {
        **{f"at {k}": t for k, t in run.checkpoints.items()},
        "after STOP": run.stopped,
        "after RELEASE": run.snapshot.stats_percpu,
    }
    return [v for when, table in tables.items() for v in _ring_law(table, run.nsamples, when)]


def check_outcomes(run: HwRun) -> list[Violation]:
    """HW-O3: every swept entry logged, refused by the log or discarded, and counted."""
    pc, stats = run.snapshot.stats_percpu, run.snapshot.stats
    parts = ("x_logged", "x_log_failed", "x_discarded_stopped", "x_discarded_owner_kernel")
    found: list[Violation] = []
    for cpu in sorted(pc):
        terms = {name: _get(pc, cpu, name) for name in parts}
        found += _law(
            "HW-O3",
            cpu,
            ("x_swept", _get(pc, cpu, "x_swept")),
            terms,
            "a sweep logs or discards each entry it frees",
        )
    found += _law(
        "HW-O3",
        None,
        ("records in hwpmc/log", len(run.log)),
        {"Σ x_logged": _total(pc, "x_logged")},
        "read back from the log",
    )
    failed, refused = _total(pc, "x_log_failed"), stats.get("buffer_requests_failed", 0)
    if failed > refused:
        found.append(
            Violation(
                "HW-O3", None, f"Σ x_log_failed ≤ {refused}", f"{failed}", "buffer_requests_failed"
            )
        )
    return found


def check_fill(run: HwRun) -> list[Violation]:
    """HW-O4: the exact fill, and (hardware stall) at most one bufferfull per restart."""
    n, found = run.nsamples, []
    table = run.checkpoints.get("fill", {})
    for cpu, calls in sorted(run.fill.items()):
        over = max(0, calls - n)
        want = {"x_recorded": min(calls, n)}
        if run.hardware_stall:  # the burst's later calls run in the same NMI: no gating
            want["x_bufferfull"] = over
        else:
            want |= {"x_bufferfull": min(over, 1), "x_stalled_nmi": max(0, over - 1)}
        found += [
            Violation(
                "HW-O4",
                cpu,
                f"{name} = {value}",
                f"{_get(table, cpu, name)}",
                f"{calls} calls injected with sweeps suppressed, nsamples {n}",
            )
            for name, value in want.items()
            if _get(table, cpu, name) != value
        ]
    if run.hardware_stall:
        pc = run.snapshot.stats_percpu
        for cpu in sorted(set(pc) - set(run.injections.nmi)):
            full, restarts = _get(pc, cpu, "x_bufferfull"), _get(pc, cpu, "x_restarts")
            if full > restarts + 1:
                found.append(
                    Violation(
                        "HW-O4",
                        cpu,
                        f"x_bufferfull ≤ x_restarts + 1 = {restarts + 1}",
                        f"{full}",
                        "a stalled counter raises no overflow",
                    )
                )
    return found


def check_restart(run: HwRun) -> list[Violation]:
    """HW-O5: the kick empties each ring and restarts its stalled PMC; the resumed calls land."""
    fill, restart = run.checkpoints.get("fill", {}), run.checkpoints.get("restart", {})
    resumed, found = run.checkpoints.get("resumed", {}), []
    for cpu, calls in sorted(run.resume.items()):
        stalled = 1 if run.fill.get(cpu, 0) > run.nsamples else 0
        laws = (
            ("x_inring", 0, _get(restart, cpu, "x_inring"), "after the sweep"),
            (
                "x_restarts",
                _get(fill, cpu, "x_restarts") + stalled,
                _get(restart, cpu, "x_restarts"),
                "one per stalled PMC",
            ),
            (
                "x_recorded",
                _get(restart, cpu, "x_recorded") + calls,
                _get(resumed, cpu, "x_recorded"),
                f"{calls} calls injected after the restart",
            ),
        )
        found += [
            Violation("HW-O5", cpu, f"{name} = {want}", f"{got}", why)
            for name, want, got, why in laws
            if got != want
        ]
    return found


def check_coverage(run: HwRun) -> list[Violation]:
    """HW-O6: after STOP and an idle phase every ring is empty; every recording CPU swept."""
    table = run.stopped
    found = [
        Violation(
            "HW-O6",
            cpu,
            "x_inring = 0",
            f"{_get(table, cpu, 'x_inring')}",
            "quiescent for many sweep periods after STOP",
        )
        for cpu in sorted(table)
        if _get(table, cpu, "x_inring")
    ]
    recording = sum(1 for cpu in table if _get(table, cpu, "x_recorded"))
    sweeps = run.snapshot.stats.get("log_sweeps", 0)
    if sweeps < recording:
        found.append(
            Violation(
                "HW-O6",
                None,
                f"log_sweeps ≥ {recording}",
                f"{sweeps}",
                "CPUs that recorded samples",
            )
        )
    return found


def check_release(run: HwRun) -> list[Violation]:
    """HW-O7: runcount drained, RELEASE bounded and successful, no NMI after RELEASE."""
    stats, found = run.snapshot.stats, []
    found += [
        Violation(
            "HW-O7",
            None,
            f"PMC {p.id:#x} runcount = 0",
            f"{p.runcount}",
            "after STOP and sweeps on every CPU",
        )
        for p in run.stopped_pmcs
        if p.runcount
    ]
    found += [
        Violation("HW-O7", None, "RELEASE returns 0", got, "bounded by release_ms")
        for got in run.releases
        if got != "ok"
    ]
    ticks = stats.get("x_release_max_ticks", 0)
    if ticks > RELEASE_TICKS:
        found.append(
            Violation(
                "HW-O7",
                None,
                f"x_release_max_ticks ≤ {RELEASE_TICKS}",
                f"{ticks}",
                "sweep ticks a RELEASE waited",
            )
        )
    later, now = run.stats_later.get("intr_ignored"), stats.get("intr_ignored")
    if later is not None and later != now:
        found.append(
            Violation(
                "HW-O7",
                None,
                f"intr_ignored stays {now}",
                f"{later}",
                "5 sweep periods after RELEASE: a counter left running",
            )
        )
    return found


def check_independence(run: HwRun) -> list[Violation]:
    """HW-O8: A stalls alone while only B sweeps; A's own sweep restarts it."""
    if run.pair is None:
        return []
    a, b = run.pair
    stalled, resumed = run.checkpoints.get("a_stalled", {}), run.checkpoints.get("a_resumed", {})
    laws = (
        (
            a,
            "x_inring",
            f"= {run.nsamples}",
            _get(stalled, a, "x_inring") == run.nsamples,
            _get(stalled, a, "x_inring"),
            "A's ring full: its sweeps suppressed",
        ),
        (
            a,
            "x_restarts",
            "= 0",
            _get(stalled, a, "x_restarts") == 0,
            _get(stalled, a, "x_restarts"),
            "nothing swept A yet",
        ),
        (
            b,
            "x_recorded",
            "> 0",
            _get(stalled, b, "x_recorded") > 0,
            _get(stalled, b, "x_recorded"),
            "B samples while A is stalled",
        ),
        (
            a,
            "x_restarts",
            "≥ 1",
            _get(resumed, a, "x_restarts") >= 1,
            _get(resumed, a, "x_restarts"),
            "A's own sweeps resumed",
        ),
        (
            a,
            "x_recorded",
            f"> {_get(stalled, a, 'x_recorded')}",
            _get(resumed, a, "x_recorded") > _get(stalled, a, "x_recorded"),
            _get(resumed, a, "x_recorded"),
            "A samples again after its restart",
        ),
    )
    return [
        Violation("HW-O8", cpu, f"{name} {want}", f"{got}", why)
        for cpu, name, want, ok, got, why in laws
        if not ok
    ]


def check_control(run: HwRun) -> list[Violation]:
    """HW-O9: each op's errno; syscalls and syscall_errors grew by what the harness did."""
    found = [
        Violation("HW-O9", None, f"{o.label}: {o.expected}", o.got, "seeds-spec §4.4")
        for o in run.ops
        if o.got != o.expected
    ]
    before, after = run.driver_before, run.driver_after
    if before and after:
        calls, errors = len(run.ops) + 1, sum(1 for o in run.ops if o.got != "ok")
        for name, want in (("syscalls", calls), ("syscall_errors", errors)):
            got = after[name] - before[name]
            if got != want:
                found.append(
                    Violation(
                        "HW-O9",
                        None,
                        f"Δ{name} = {want}",
                        f"{got}",
                        "calls the harness made, failures it saw",
                    )
                )
    if run.ss_around_offline_start and len(set(run.ss_around_offline_start)) != 1:
        was, now = run.ss_around_offline_start
        found.append(
            Violation(
                "HW-O9",
                None,
                f"x_ss_running stays {was}",
                f"{now}",
                "START on an offline CPU has no side effect (HW-D6)",
            )
        )
    return found


def check_records(run: HwRun) -> list[Violation]:
    """HW-O10: log records numbered 1..N, each on its PMC's CPU, flags and pid consistent."""
    found: list[Violation] = []
    seqs = [r.seq for r in run.log]
    if seqs != list(range(1, len(seqs) + 1)):
        gap = next(i for i, s in enumerate(seqs, 1) if s != i)
        found.append(
            Violation(
                "HW-O10",
                None,
                f"seq {gap} at record {gap}",
                f"seq {seqs[gap - 1]}",
                "torn, lost or duplicated records",
            )
        )
    bad: Counter[tuple[int, str]] = Counter()
    for r in run.log:
        system = (r.pmcid >> 8) & 0xF in (PMC_MODES["SS"], PMC_MODES["SC"])
        user = bool(r.flags & 1)
        if system and r.cpu != r.pmcid >> 12:
            bad[(r.cpu, f"cpu ≠ its SS PMC's CPU {r.pmcid >> 12}")] += 1
        if r.cpu not in run.online_cpus:
            bad[(r.cpu, "cpu not online")] += 1
        if user != (r.pc < KERNEL_PC):
            bad[(r.cpu, "user flag disagrees with the PC")] += 1
        if user and r.pid == PID_NONE:
            bad[(r.cpu, "user-mode sample without a pid")] += 1
        if r.depth != 1:
            bad[(r.cpu, f"depth {r.depth}")] += 1
    found += [
        Violation("HW-O10", cpu, "no such record", f"{n} records", why)
        for (cpu, why), n in sorted(bad.items())
    ]
    return found


def check_nmi(run: HwRun) -> list[Violation]:
    """NMI: `harness.agent.core_oracles.check_nmi_context` on the run's core counters."""
    return nmi_context(run.snapshot.core, run.nmi_expected)


# HW-SC's model. The guest's CLOCK_MONOTONIC (the generic timer, 16 ns ticks) and
# TCG's cycle counter (1 per ns) both run off QEMU's virtual clock, so the count of
# a window is its length in guest time: no host load can stretch one without the
# other. START enables the event between the two clock reads around it, STOP
# disables it between the two around it, so the count lies between the inner and
# the outer bracket, widened by a clock tick at each end and the clocksource's
# ns conversion (well under 1e-4 of the window).
SC_SLACK_NS = 1_000
SC_SLACK_REL = 1e-4


def check_counting(run: HwRun) -> list[Violation]:
    """HW-SC: the SC PMC's count against the guest clock around START and STOP.

    Also: its value while running lies between SETCOUNT's and the stopped one, and a
    stopped PMC holds still.
    """
    sc = run.counting
    if sc is None:
        return []
    found = []
    c0, c1, c2, c3 = sc.clocks
    counted = sc.stopped - sc.initial
    if sc.events_per_ns is not None:
        rate = sc.events_per_ns
        low = rate * ((c2 - c1) * (1 - SC_SLACK_REL) - SC_SLACK_NS)
        high = rate * ((c3 - c0) * (1 + SC_SLACK_REL) + SC_SLACK_NS)
        if not low <= counted <= high:
            found.append(Violation(
                "HW-SC", sc.cpu, f"{low:.0f} ≤ counted ≤ {high:.0f}",
                f"counted {counted} (RW after STOP {sc.stopped} - SETCOUNT {sc.initial})",
                f"{rate:g} per ns over {(c2 - c1) / 1e6:.3f}..{(c3 - c0) / 1e6:.3f} ms guest time",
            ))  # fmt: skip
    elif counted <= 0:
        found.append(Violation(
            "HW-SC", sc.cpu, "a count > 0 after a window of "
            f"{(c2 - c1) / 1e6:.3f} ms", f"counted {counted}", "no fixed rate to bound it by",
        ))  # fmt: skip
    if not sc.initial <= sc.running <= sc.stopped:
        found.append(Violation(
            "HW-SC", sc.cpu, f"SETCOUNT {sc.initial} ≤ RW running ≤ RW stopped {sc.stopped}",
            f"RW while running {sc.running}",
        ))  # fmt: skip
    if sc.later != sc.stopped:
        found.append(Violation(
            "HW-SC", sc.cpu, f"a stopped PMC holds {sc.stopped}",
            f"{sc.later} after the idle phase",
        ))  # fmt: skip
    return found


_CHECKS: dict[str, Callable[[HwRun], list[Violation]]] = {
    "HW-O1": check_interrupts,
    "HW-O2": check_rings,
    "HW-O3": check_outcomes,
    "HW-O4": check_fill,
    "HW-O5": check_restart,
    "HW-O6": check_coverage,
    "HW-O7": check_release,
    "HW-O8": check_independence,
    "HW-O9": check_control,
    "HW-O10": check_records,
    "HW-SC": check_counting,
    "NMI": check_nmi,
}
