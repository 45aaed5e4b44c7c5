"""What each of dt's own laws compared in one run: the n of its PASS.

One `Judged` a law of `harness.agent.flavours.dt.oracles`' table that is not the
core's, counted from the run data that law's check reads: the gets the producer
made, the events and bytes read, the PMU's periods, the background reader's reads.
Where the population can be chosen by what the harness knows (its injections,
nested windows and forced skips, the core's producer calls and overflows, which IRQ
and CALLS tie to the kernel's interrupt count), it is, not by the counters under
test. n = 0 only when the check had nothing to compare; ``why`` says so::

    compared_dt(run)     # [Judged("DT-O1", 33, "gets (producer calls and nested ..."), ...]
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent.flavours.dt.counters import gstats_laws, periods_skipped, reads_whole_events
from harness.agent.flavours.dt.results import DtRun
from harness.agent.oracles.nmi import judge_nmi
from harness.agent.values.results import Judged

#: Why a law of the gets compared nothing.
NO_GET = "no producer call and no nested window on any CPU"


def compared_dt(run: DtRun) -> list[Judged]:
    """What each of dt's own laws (DT-O1 … DT-INJ, NMI) compared in ``run``."""
    on = f"on {len(_cpus(run))} CPUs"
    gets, nested = _sum(_gets(run)), _sum(run.nested)
    return [
        Judged("DT-O1", gets, f"gets (producer calls and nested windows) {on}, each "
               "recurred, dropped or committed, and read or in the ring", why=NO_GET),
        Judged("DT-O2", _outside_windows(run), f"gets outside nested windows {on}, each "
               "committed or dropped before any read",
               why="no get outside a nested window on any CPU"),
        _drain(run),
        _gstats(run),
        Judged("DT-O6", gets, f"gets {on}, each recurring only inside a nested window "
               f"({nested} inside)", why=NO_GET),
        _skipticks(run, on),
        Judged("DT-O8", run.background_reads, f"reads racing the producers, none of 0 "
               f"bytes (the reader ended by {run.background_errno})",
               why="the background reader never read: no event came while recording"),
        Judged("DT-O10", _committed(run), f"committed events {on}, each held to reach "
               f"exactly one of {run.concurrent_readers} readers",
               why="no event committed on any CPU"),
        _injection(run, on),
        judge_nmi(run),  # the shared law's count: overflows and producer calls
    ]  # fmt: skip


def _drain(run: DtRun) -> Judged:
    """DT-O3: every event read checked whole; with ragged DT-D2 reads, the bytes bounded."""
    if reads_whole_events(run):
        return Judged("DT-O3", len(run.events), "events read, each checked whole (seq, canary, "
                      "probe, CPU) against x_committed", why="no event read")  # fmt: skip
    return Judged("DT-O3", run.bytes_read, f"bytes read in {run.read_size}-byte reads (DT-D2 "
                  "cuts events), bounded by the events counted as read",
                  why="no byte read")  # fmt: skip


def _gstats(run: DtRun) -> Judged:
    """DT-O4: the events the per-CPU counters hold that DTIOCGSTATS must sum, after the read.

    The after-read reading counts all the before-read one did, and the read events.
    """
    counted = sum(law.want for law in gstats_laws(run, run.after_read))
    return Judged("DT-O4", counted, "events counted per CPU (read, dropped, skipped, "
                  "recursed) held to DTIOCGSTATS before and after the read",
                  why="no event counted on any CPU")  # fmt: skip


def _skipticks(run: DtRun, on: str) -> Judged:
    """DT-O7: the producer calls (bursts only), or the PMU periods DT-L5 judges.

    Without profile ticks each producer call adds the forced skips and nothing else;
    with them, each period the PMU counted on a CPU DT-L5 judges (the kernel's count
    read, one event created) was delivered, skipped or pending.
    """
    if not run.spec.pmu_produce:
        calls = _sum(_producer_calls(run))
        return Judged("DT-O7", calls, f"producer calls {on}, each adding only the forced "
                      f"skips ({_sum(run.skips)} forced)",
                      why="no producer call on any CPU")  # fmt: skip
    judged = [cpu for cpu in sorted(run.before_read.percpu)
              if periods_skipped(run, cpu) is not None]  # fmt: skip
    periods = sum(run.core.get(cpu, {}).get("x_counter_value", 0) // run.spec.period
                  for cpu in judged)  # fmt: skip
    why = "the PMU counted no full period" if judged else (
        "no CPU with the kernel's interrupt count and one event created")  # fmt: skip
    return Judged("DT-O7", periods, f"PMU periods on {len(judged)} of "
                  f"{len(run.before_read.percpu)} CPUs, each delivered, skipped or pending "
                  "(DT-L5)", why=why)  # fmt: skip


def _injection(run: DtRun, on: str) -> Judged:
    """DT-INJ: the gets the harness caused: its injections, nested calls and windows."""
    injected, nested, windows = _sum(run.injected or {}), _sum(run.nested), _sum(run.windows)
    return Judged("DT-INJ", injected + nested + windows, f"gets the harness caused {on} "
                  f"({injected} injected, {nested} nested, {windows} windows' outer gets)",
                  why="the harness injected nothing")  # fmt: skip


def _cpus(run: DtRun) -> set[int]:
    return set(run.before_read.percpu) | set(run.after_read.percpu) | set(run.core)


def _producer_calls(run: DtRun) -> dict[int, int]:
    """The core's producer calls per CPU (CALLS ties them to the interrupts and injections)."""
    return {cpu: values.get("x_producer_calls", 0) for cpu, values in run.core.items()}


def _gets(run: DtRun) -> dict[int, int]:
    """Gets on the open per CPU: one per producer call, one per nested window (DT-O1)."""
    calls = _producer_calls(run)
    return {cpu: calls.get(cpu, 0) + run.windows.get(cpu, 0)
            for cpu in set(calls) | set(run.windows)}  # fmt: skip


def _outside_windows(run: DtRun) -> int:
    """Gets outside nested windows: the ones DT-L4 commits or drops (none below 0 a CPU)."""
    return sum(max(0, gets - run.nested.get(cpu, 0)) for cpu, gets in _gets(run).items())


def _committed(run: DtRun) -> int:
    return sum(values.get("x_committed", 0) for values in run.after_read.percpu.values())


def _sum(counts: Mapping[int, int]) -> int:
    return sum(counts.values())
