"""hwpmc's stall oracles (seeds-spec §7.4 HW-O4, HW-O5, HW-O8).

Full rings, restarts, and stall state per (PMC, CPU). Each check takes an `HwpmcRun`
and compares the per-CPU tables the plan read at its checkpoints with the calls the
harness injected and the sweeps it allowed::

    check_fill(run)           # HW-O4: min(N, n) recorded, the rest bufferfull; gating
    check_restart(run)        # HW-O5: the kick empties the ring and restarts; calls land
    check_independence(run)   # HW-O8: A stays stalled while only B sweeps, then restarts

``judge_fill``, ``judge_restart`` and ``judge_independence`` say what each compared
(`Judged`: the producer calls or entries held to the law; 0, with why, for none).
"""

from __future__ import annotations

from harness.agent.flavours.hwpmc.results import HwpmcRun, cell
from harness.agent.oracles.laws import at_least, at_most, equal, zero
from harness.agent.values.results import Judged, Violation


def check_fill(run: HwpmcRun) -> list[Violation]:
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
        why = f"{calls} calls injected with sweeps suppressed, nsamples {n}"
        for name, value in want.items():
            found += equal("HW-O4", cpu, name, want=value, got=cell(table, cpu, name), detail=why)
    if run.hardware_stall:
        percpu = run.counters.stats_percpu
        for cpu in sorted(set(percpu) - set(run.injections.nmi)):
            restarts = cell(percpu, cpu, "x_restarts")
            found += at_most("HW-O4", cpu, "x_bufferfull", bound=restarts + 1,
                             got=cell(percpu, cpu, "x_bufferfull"),
                             detail=f"x_restarts {restarts} + 1: a stalled counter raises "
                             "no overflow")  # fmt: skip
    return found


def _gated(run: HwpmcRun) -> int:
    """Producer calls that found a full ring on the CPUs `check_fill`'s gating law bounds."""
    if not run.hardware_stall:
        return 0
    percpu = run.counters.stats_percpu
    return sum(cell(percpu, cpu, "x_bufferfull") for cpu in set(percpu) - set(run.injections.nmi))


def judge_fill(run: HwpmcRun) -> Judged:
    """HW-O4 compared the calls injected into suppressed rings and the ring-full calls gated.

    The gating law bounds calls that found a ring full by the restarts: with none it
    cannot fail, so a run whose rings never filled compared nothing there.
    """
    injected, gated = sum(run.fill.values()), _gated(run)
    what = (f"producer calls: {injected} injected with sweeps suppressed on {len(run.fill)} "
            "CPUs, each held to its outcome")  # fmt: skip
    if run.hardware_stall:
        what += f"; {gated} that found a ring full, held to one per restart"
    why = "no call injected with sweeps suppressed and no ring found full"
    return Judged("HW-O4", injected + gated, what, why=why)


def check_restart(run: HwpmcRun) -> list[Violation]:
    """HW-O5: the kick empties each ring and restarts its stalled PMC; the resumed calls land."""
    fill, restart = run.checkpoints.get("fill", {}), run.checkpoints.get("restart", {})
    resumed, found = run.checkpoints.get("resumed", {}), []
    for cpu, calls in sorted(run.resume.items()):
        stalled = 1 if run.fill.get(cpu, 0) > run.nsamples else 0
        found += equal("HW-O5", cpu, "x_inring", want=0, got=cell(restart, cpu, "x_inring"),
                       detail="after the sweep")  # fmt: skip
        found += equal(
            "HW-O5",
            cpu,
            "x_restarts",
            want=cell(fill, cpu, "x_restarts") + stalled,
            got=cell(restart, cpu, "x_restarts"),
            detail="one per stalled PMC",
        )
        found += equal(
            "HW-O5",
            cpu,
            "x_recorded",
            want=cell(restart, cpu, "x_recorded") + calls,
            got=cell(resumed, cpu, "x_recorded"),
            detail=f"{calls} calls injected after the restart",
        )
    return found


def judge_restart(run: HwpmcRun) -> Judged:
    """HW-O5 compared each call injected after the restarting sweep (its ring emptied first)."""
    what = (f"producer calls injected after the restarting sweep on {len(run.resume)} CPUs, "
            "each held to a recorded entry")  # fmt: skip
    return Judged("HW-O5", sum(run.resume.values()), what, why="no call injected after a restart")


def check_independence(run: HwpmcRun) -> list[Violation]:
    """HW-O8: A stalls alone while only B sweeps; A's own sweep restarts it."""
    if run.pair is None:
        return []
    a, b = run.pair
    stalled, resumed = run.checkpoints.get("a_stalled", {}), run.checkpoints.get("a_resumed", {})
    before = cell(stalled, a, "x_recorded")
    return [
        *equal("HW-O8", a, "x_inring", want=run.nsamples, got=cell(stalled, a, "x_inring"),
               detail="A's ring full: its sweeps suppressed"),
        *zero("HW-O8", a, "x_restarts", got=cell(stalled, a, "x_restarts"),
              detail="nothing swept A yet"),
        *at_least("HW-O8", b, "x_recorded", bound=1, got=cell(stalled, b, "x_recorded"),
                  detail="B samples while A is stalled"),
        *at_least("HW-O8", a, "x_restarts", bound=1, got=cell(resumed, a, "x_restarts"),
                  detail="A's own sweeps resumed"),
        *at_least("HW-O8", a, "x_recorded", bound=before + 1, got=cell(resumed, a, "x_recorded"),
                  detail=f"A samples again after its restart ({before} when stalled)"),
    ]  # fmt: skip


def judge_independence(run: HwpmcRun) -> Judged:
    """HW-O8 compared A's full ring, B's entries while A stalled, A's after its restart."""
    if run.pair is None:
        return Judged("HW-O8", 0, "entries of a stalled and a sweeping CPU", why="no pair run")
    a, b = run.pair
    stalled, resumed = run.checkpoints.get("a_stalled", {}), run.checkpoints.get("a_resumed", {})
    full, by_b = cell(stalled, a, "x_inring"), cell(stalled, b, "x_recorded")
    after = max(0, cell(resumed, a, "x_recorded") - cell(stalled, a, "x_recorded"))
    what = (f"entries: {full} in A's (CPU {a}) full ring, {by_b} B's (CPU {b}) by A's stall, "
            f"{after} A's after its restart")  # fmt: skip
    return Judged("HW-O8", full + by_b + after, what, why="neither CPU recorded an entry")
