"""hwpmc's conservation oracles (seeds-spec §7.4 HW-O1 … HW-O3): where each call went.

Every producer call, ring entry and log record ends in exactly one counted place.

Each check takes an `HwpmcRun` and returns every broken law as `Violation` values; the
registry (`harness.agent.flavours.hwpmc.oracles`) decides which apply::

    check_interrupts(run)     # HW-O1: producer calls → ignored, recorded, bufferfull, stalled
    check_rings(run)          # HW-O2: recorded = swept + in ring; a full ring holds n
    check_outcomes(run)       # HW-O3: swept → logged, log failed, discarded; the log read back

Beside each check, what it compared (`Judged`: n counts the calls or entries it held to
its law, 0 with why when there were none)::

    judge_interrupts(run)     # HW-O1: n=20 producer calls on 2 CPUs, each held to one outcome

HW-O1 starts from the core's producer calls, which the shared oracles tie to the
kernel's interrupt count; HW-O2's fill law and HW-O3's failure law start from what
the harness injected.
"""

from __future__ import annotations

from harness.agent.flavours.hwpmc.results import HwpmcRun, Table, cell, total
from harness.agent.oracles.laws import equal, sums_to, zero
from harness.agent.values.results import Judged, Violation


def check_interrupts(run: HwpmcRun) -> list[Violation]:
    """HW-O1: every producer call (core count, tied to /proc/interrupts) has one outcome."""
    percpu, core, stats = run.counters.stats_percpu, run.counters.core, run.counters.stats
    outcomes = ("x_ignored", "x_recorded", "x_bufferfull", "x_stalled_nmi")
    found: list[Violation] = []
    for cpu in sorted(core):
        terms = {name: cell(percpu, cpu, name) for name in outcomes}
        found += sums_to(
            "HW-O1",
            cpu,
            ("x_producer_calls", cell(core, cpu, "x_producer_calls")),
            terms,
            "each producer call is ignored, recorded, bufferfull or stalled",
        )
        if run.hardware_stall:
            found += zero("HW-O1", cpu, "x_stalled_nmi", got=terms["x_stalled_nmi"],
                          detail="a stopped counter raises no NMI")  # fmt: skip
    sums = (
        ("intr_bufferfull", ("x_bufferfull",)),
        ("intr_ignored", ("x_ignored",)),
        ("intr_processed", ("x_recorded", "x_bufferfull", "x_stalled_nmi")),
    )
    for stat, parts in sums:
        terms = {f"Σ {p}": total(percpu, p) for p in parts}
        found += sums_to("HW-O1", None, (stat, stats.get(stat, 0)), terms, "global = Σ per CPU")
    return found


def judge_interrupts(run: HwpmcRun) -> Judged:
    """HW-O1 compared each producer call the core counted (and the global sums over them)."""
    core = run.counters.core
    what = f"producer calls on {len(core)} CPUs, each held to one outcome"
    return Judged("HW-O1", total(core, "x_producer_calls"), what, why="no producer call on any CPU")


def _ring_law(table: Table, when: str) -> list[Violation]:
    """On every CPU of ``table``: recorded = swept + in ring."""
    found: list[Violation] = []
    for cpu in sorted(table):
        terms = {"x_swept": cell(table, cpu, "x_swept"), "x_inring": cell(table, cpu, "x_inring")}
        found += sums_to(
            "HW-O2",
            cpu,
            ("x_recorded", cell(table, cpu, "x_recorded")),
            terms,
            f"{when}; x_inring counts the entries' states",
        )
    return found


def _full_rings(run: HwpmcRun) -> list[Violation]:
    """With sweeps suppressed, N calls on c leave min(N, n) entries in c's ring.

    The spec's bound ``x_inring ≤ n`` cannot fail here: x_inring counts the ring's n
    slots. What it is after is the ring's capacity, which this law reads from the
    entries' states against the calls the harness injected: exactly n when full.
    """
    table, n = run.checkpoints.get("fill", {}), run.nsamples
    return [
        v
        for cpu, calls in sorted(run.fill.items())
        for v in equal("HW-O2", cpu, "x_inring at the fill", want=min(calls, n),
                       got=cell(table, cpu, "x_inring"),
                       detail=f"{calls} calls injected with sweeps suppressed, nsamples {n}")
    ]  # fmt: skip


def _ring_tables(run: HwpmcRun) -> dict[str, Table]:
    """Every per-CPU table the run read (mid-run, after STOP, after RELEASE), by when."""
    return {
        **{f"at {k}": t for k, t in run.checkpoints.items()},
        "after STOP": run.stopped,
        "after RELEASE": run.counters.stats_percpu,
    }


def check_rings(run: HwpmcRun) -> list[Violation]:
    """HW-O2 at every table the run read (mid-run, after STOP, after RELEASE); full rings."""
    tables = _ring_tables(run)
    found = [v for when, table in tables.items() for v in _ring_law(table, when)]
    return found + _full_rings(run)


def judge_rings(run: HwpmcRun) -> Judged:
    """HW-O2 compared the entries recorded: the most any table it read held to its law.

    The counts only grow, so the largest Σ x_recorded is every entry the run recorded;
    each was held to swept + in ring at every read that had it. A fill adds its rings'
    capacity against the calls injected, on entries the same tables count.
    """
    tables = _ring_tables(run)
    recorded = max(total(table, "x_recorded") for table in tables.values())
    cpus = len(run.counters.stats_percpu)
    what = f"entries recorded on {cpus} CPUs, each swept or in its ring at {len(tables)} reads"
    if run.fill:
        what += f"; {len(run.fill)} full rings held to min(calls, n)"
    return Judged("HW-O2", recorded, what, why="no entry recorded on any CPU")


def check_outcomes(run: HwpmcRun) -> list[Violation]:
    """HW-O3: every swept entry logged, refused by the log or discarded, and counted."""
    percpu = run.counters.stats_percpu
    parts = ("x_logged", "x_log_failed", "x_discarded_stopped", "x_discarded_owner_kernel")
    found: list[Violation] = []
    for cpu in sorted(percpu):
        terms = {name: cell(percpu, cpu, name) for name in parts}
        found += sums_to(
            "HW-O3",
            cpu,
            ("x_swept", cell(percpu, cpu, "x_swept")),
            terms,
            "a sweep logs or discards each entry it frees",
        )
    found += sums_to(
        "HW-O3",
        None,
        ("records in hwpmc/log", len(run.log)),
        {"Σ x_logged": total(percpu, "x_logged")},
        "read back from the log",
    )
    return found + _log_failures(run)


def judge_outcomes(run: HwpmcRun) -> Judged:
    """HW-O3 compared each swept entry (and the log's records against Σ x_logged)."""
    percpu = run.counters.stats_percpu
    what = (f"swept entries on {len(percpu)} CPUs, each logged, refused or discarded; "
            f"{len(run.log)} log records against Σ x_logged")  # fmt: skip
    return Judged("HW-O3", total(percpu, "x_swept"), what, why="no entry swept on any CPU")


def _log_failures(run: HwpmcRun) -> list[Violation]:
    """A log with room refuses exactly the writes the harness made fail.

    Replaces the spec's ``Σ x_log_failed ≤ buffer_requests_failed``, which cannot
    fail: the agent counts each failed write right after counting its refused
    reservation. Records are never taken out of hwpmc/log, so a log that is not full
    never refused for room; then both counts equal the faults the harness injected
    (``hwpmc_log``; the exact run injects one). A full log refuses for room as well,
    by counts only the agent keeps: no law then.
    """
    if len(run.log) >= run.log_capacity:
        return []
    why = f"hwpmc_log faults the harness injected; the log holds {len(run.log)} of "
    why += f"{run.log_capacity}"
    failed = total(run.counters.stats_percpu, "x_log_failed")
    refused = run.counters.stats.get("buffer_requests_failed", 0)
    return [
        *equal("HW-O3", None, "Σ x_log_failed", want=run.log_faults, got=failed, detail=why),
        *equal("HW-O3", None, "buffer_requests_failed", want=run.log_faults, got=refused,
               detail=why),
    ]  # fmt: skip
