"""hwpmc's read-back oracles (seeds-spec §7.4 HW-O10, and HW-SC).

What the log's records and a counting PMC say; each check takes an `HwpmcRun`::

    check_records(run)        # HW-O10: seq 1..N, producing CPU, user flag, pid, depth 1
    check_counting(run)       # HW-SC: an SC PMC's count against the guest clock
    judge_records(run)        # n=18 records read, each checked whole (`Judged`)
    judge_counting(run)       # n=1500000000 events the SC PMC counted, against the clock
"""

from __future__ import annotations

from collections import Counter

from harness.agent.flavours.hwpmc.data import PMC_MODES
from harness.agent.flavours.hwpmc.results import USER_FLAG, HwpmcRun
from harness.agent.values.results import Judged, Violation

KERNEL_PC = 1 << 63  # arm64 and x86-64 kernel addresses have the top bit set
PID_NONE = 0xFFFFFFFF


def check_records(run: HwpmcRun) -> list[Violation]:
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
        user = bool(r.flags & USER_FLAG)
        if system and r.cpu != r.pmcid >> 12:
            bad[(r.cpu, f"cpu ≠ its SS PMC's CPU {r.pmcid >> 12}")] += 1
        if r.cpu not in run.online_cpus:
            bad[(r.cpu, "cpu not online")] += 1
        if user != (r.pc < KERNEL_PC):
            bad[(r.cpu, "user flag disagrees with the PC")] += 1
        if user and r.pid == PID_NONE:
            bad[(r.cpu, "user-mode sample without a pid")] += 1
        if not 1 <= r.depth <= run.spec.param("callchaindepth"):
            bad[(r.cpu, f"depth {r.depth}")] += 1
    found += [
        Violation("HW-O10", cpu, "no such record", f"{n} records", why)
        for (cpu, why), n in sorted(bad.items())
    ]
    return found


def judge_records(run: HwpmcRun) -> Judged:
    """HW-O10 compared each record read back from hwpmc/log."""
    what = "records read from hwpmc/log, each checked whole (seq, CPU, flags, pid, depth)"
    return Judged("HW-O10", len(run.log), what, why="no record in hwpmc/log")


# HW-SC's model. The guest's CLOCK_MONOTONIC (the generic timer, 16 ns ticks) and
# TCG's cycle counter (1 per ns) both run off QEMU's virtual clock, so the count of
# a window is its length in guest time: no host load can stretch one without the
# other. START enables the event between the two clock reads around it, STOP
# disables it between the two around it, so the count lies between the inner and
# the outer bracket, widened by a clock tick at each end and the clocksource's
# ns conversion (well under 1e-4 of the window).
SC_SLACK_NS = 1_000
SC_SLACK_REL = 1e-4


def check_counting(run: HwpmcRun) -> list[Violation]:
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


def judge_counting(run: HwpmcRun) -> Judged:
    """HW-SC compared the events the SC PMC counted from START to STOP with the guest clock.

    A count of 0 or less compared nothing (and `check_counting` says why it is wrong).
    """
    sc = run.counting
    if sc is None:
        return Judged("HW-SC", 0, "events an SC PMC counted", why="no SC PMC in the run")
    what = (f"events the SC PMC counted on CPU {sc.cpu} from START to STOP, held to the "
            "guest clock; 3 RW reads held in order")  # fmt: skip
    return Judged("HW-SC", max(0, sc.stopped - sc.initial), what, why="the SC PMC counted nothing")
