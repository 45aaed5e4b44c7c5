"""hwpmc's lifecycle oracles (seeds-spec §7.4 HW-O6, HW-O7, HW-O9).

Quiescence after STOP, RELEASE, and the control plane; each check takes an `HwpmcRun`::

    check_coverage(run)       # HW-O6: after STOP and an idle phase every ring is empty
    check_release(run)        # HW-O7: runcount 0, RELEASE bounded, no counter left running
    check_control(run)        # HW-O9: each op's errno; syscalls and errors counted exactly

``judge_coverage``, ``judge_release`` and ``judge_control`` say what each compared
(`Judged`: entries, PMCs and RELEASEs, ops; 0, with why, for none).
"""

from __future__ import annotations

from harness.agent.flavours.hwpmc.results import HwpmcRun, cell, total
from harness.agent.oracles.laws import at_most, equal, zero
from harness.agent.values.results import Judged, Violation

# A RELEASE's entries are freed by each CPU's first sweep tick after it began (fixed
# mode: every recording CPU is marked, nothing pending, the timer sweeps the whole
# ring). The agent counts those ticks on each CPU's own timer, so a host that delays
# the releasing thread or the vCPU cannot add to them; a second tick means a sweep
# skipped entries it should have freed.
RELEASE_TICKS = 1


def check_coverage(run: HwpmcRun) -> list[Violation]:
    """HW-O6: after STOP and an idle phase every ring is empty.

    The spec's second half, ``log_sweeps ≥ CPUs that recorded``, is not checked:
    log_sweeps counts every CPU's sweeps, so one busy CPU meets it for all. What it
    is after, every CPU that recorded was swept, follows per CPU from this law and
    HW-O2 on the same table: recorded = swept + 0.
    """
    return [
        v
        for cpu in sorted(run.stopped)
        for v in zero("HW-O6", cpu, "x_inring", got=cell(run.stopped, cpu, "x_inring"),
                      detail="quiescent for many sweep periods after STOP")
    ]  # fmt: skip


def judge_coverage(run: HwpmcRun) -> Judged:
    """HW-O6 compared each entry recorded before STOP: none may be left in a ring."""
    what = f"entries recorded on {len(run.stopped)} CPUs by STOP, none left in a ring"
    return Judged("HW-O6", total(run.stopped, "x_recorded"), what, why="no entry recorded by STOP")


def check_release(run: HwpmcRun) -> list[Violation]:
    """HW-O7: runcount drained, RELEASE bounded and successful, no NMI after RELEASE."""
    stats, found = run.counters.stats, []
    for pmc in run.stopped_pmcs:
        found += zero("HW-O7", None, f"PMC {pmc.id:#x} runcount", got=pmc.runcount,
                      detail="after STOP and sweeps on every CPU")  # fmt: skip
    found += [
        Violation("HW-O7", None, "RELEASE returns 0", got, "bounded by release_ms")
        for got in run.releases
        if got != "ok"
    ]
    found += at_most("HW-O7", None, "x_release_max_ticks", bound=RELEASE_TICKS,
                     got=stats.get("x_release_max_ticks", 0),
                     detail="sweep ticks a RELEASE waited")  # fmt: skip
    later, now = run.stats_later.get("intr_ignored"), stats.get("intr_ignored", 0)
    if later is not None:
        found += equal("HW-O7", None, "intr_ignored after RELEASE and 5 sweep periods of spinning",
                       want=now, got=later,
                       detail="a counter left running raises overflows")  # fmt: skip
    return found


def judge_release(run: HwpmcRun) -> Judged:
    """HW-O7 compared the stopped PMCs' runcounts and every RELEASE that returned 0.

    The tick bound and the quiet after RELEASE rest on those RELEASEs: the run's own
    and, in a control run, its PMCRELEASE ops that succeeded (their errno is HW-O9's).
    """
    pmcs, releases = len(run.stopped_pmcs), len(run.releases)
    ops = sum(1 for o in run.ops if o.op == "PMCRELEASE" and o.got == "ok")
    what = (f"PMCs and RELEASEs: runcount 0 after STOP for {pmcs}, RELEASE within "
            f"{RELEASE_TICKS} sweep tick for {releases + ops} ({ops} control ops)")  # fmt: skip
    return Judged("HW-O7", pmcs + releases + ops, what,
                  why="the run stopped and released no PMC")  # fmt: skip


def check_control(run: HwpmcRun) -> list[Violation]:
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
            found += equal("HW-O9", None, f"Δ{name}", want=want, got=after[name] - before[name],
                           detail="calls the harness made, failures it saw")  # fmt: skip
    if run.ss_around_offline_start:
        was, now = run.ss_around_offline_start
        found += equal("HW-O9", None, "x_ss_running after START on an offline CPU", want=was,
                       got=now, detail="no side effect (HW-D6)")  # fmt: skip
    return found


def judge_control(run: HwpmcRun) -> Judged:
    """HW-O9 compared each control op's errno (and the syscall counts they add up to)."""
    what = "control ops, each held to its §4.4 errno"
    if run.driver_before and run.driver_after:
        what += ", all to Δsyscalls and Δsyscall_errors"
    return Judged("HW-O9", len(run.ops), what, why="no control op")
