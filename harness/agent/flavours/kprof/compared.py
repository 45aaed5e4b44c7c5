"""What each of kprof's own laws compared in one run: the n of its PASS line.

Each count is read from the same run data the law's check reads
(`harness.agent.flavours.kprof.blocks`, `.stream`, `.control`), in the unit the
law holds to its equation: producer calls, records, full blocks, readings,
reads, kpctl commands, bytes, kpdata writes; never CPUs alone. A
count is 0 exactly when the check had nothing to compare, and then ``why``
says so (the law prints UNJUDGED)::

    compared_kprof(run)   # [Judged("KP-O1", 6557, "producer calls on 1 CPU ..."), ...]

A count is made for every law of the table, applicable or not
(`harness.agent.oracles.core.judge_flavour` keeps the applicable ones); NMI's is the
core's count for every flavour (`harness.agent.oracles.core.judge_nmi`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.control import CONTROL_FIXED
from harness.agent.flavours.kprof.model import calls_while_tracing, geometry
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.oracles.nmi import judge_nmi
from harness.agent.values.results import Judged


def compared_kprof(run: KprofRun) -> list[Judged]:
    """One `Judged` for each of kprof's own laws (KP-O1 … KP-O10, NMI) in ``run``."""
    return [count(run) for count in _COUNTS]


def _on(cpus: Collection[int]) -> str:
    return f"on {len(cpus)} CPU{'' if len(cpus) == 1 else 's'}"


def _accounting(run: KprofRun) -> Judged:
    """KP-O1: the producer calls (core count + kpdata writes) each CPU's counters must sum to."""
    final = run.last
    calls = sum(run.core_at_final.get(cpu, {}).get("x_producer_calls", 0)
                + final.get(cpu, "x_kpdata_injected") for cpu in final.percpu)  # fmt: skip
    what = f"producer calls {_on(final.percpu)} (core count + kpdata writes), each in one counter"
    return Judged("KP-O1", calls, what, why="no producer call on any CPU")


def _blocks(run: KprofRun) -> Judged:
    """KP-O2: the records the harness put on each CPU (N = injected + kpdata), laid in blocks."""
    calls = calls_while_tracing(run)
    _, _, size, per_block = geometry(run)
    what = f"records {_on(calls)} laid in blocks of R = {per_block} × L = {size} (harness count)"
    return Judged("KP-O2", sum(calls.values()), what,
                  why="the harness made no producer call while tracing")  # fmt: skip


def _queue(run: KprofRun) -> Judged:
    """KP-O3: the full blocks F the CPUs offered the queue, by the harness's count."""
    _, limit, size, per_block = geometry(run)
    full = sum((n - 1) // per_block for n in calls_while_tracing(run).values() if n)
    room = math.ceil(limit / (per_block * size))
    why = f"no CPU filled a block: none had more than R = {per_block} records"
    return Judged("KP-O3", full, f"full blocks offered to the queue (Q = {limit}: {room} fit)",
                  why=why)  # fmt: skip


def _stream(run: KprofRun) -> Judged:
    """KP-O4: the records read to the end of the stream, each decoded and checked whole."""
    after = run.readings.get(res.AFTER_READ, run.last)
    per_cpu = ("" if after.total("x_blocks_flushed_closed") == 0
               else "; per-CPU counts not held: blocks flushed to a closed queue")  # fmt: skip
    what = (f"records read to EOF ({len(run.trace)} trace, {run.status_records} status), "
            f"each decoded whole{per_cpu}")  # fmt: skip
    kept = after.total("x_records_committed") - after.total("x_records_in_dropped_blocks")
    return Judged("KP-O4", len(run.trace) + run.status_records, what,
                  why=f"no record read; {kept} committed outside dropped blocks")  # fmt: skip


def _limit(run: KprofRun) -> Judged:
    """KP-O5: the readings whose qlen was held to its bound."""
    held = [name for name in run.readings if name not in (res.QUEUED, res.REOPENED)]
    what = "readings of qlen held to Q - 1 + B (qpass) or Q - 1 + (ncpu + 1)·B (flushed)"
    return Judged("KP-O5", len(held), what, why="the run took no reading of the session")


def _visibility(run: KprofRun) -> Judged:
    """KP-O6: the two qlen reads, after R records on one CPU and after one more."""
    reads = len({res.VISIBLE_BEFORE, res.VISIBLE_AFTER} & set(run.readings))
    what = f"qlen reads on one CPU, after R = {geometry(run)[3]} records and after one more"
    return Judged("KP-O6", reads if reads == 2 else 0, what,
                  why="the run took no visibility readings")  # fmt: skip


def _eof(run: KprofRun) -> Judged:
    """KP-O7: the reads past the end of the stream."""
    return Judged("KP-O7", len(run.eof), "reads past the end of the stream",
                  why="no read met the end of the stream")  # fmt: skip


def _control(run: KprofRun) -> Judged:
    """KP-O8: the kpctl probes whose outcome was read, and a flush while stopped."""
    probes = len(set(CONTROL_FIXED) & set(run.control))  # KP-D3 names the same probes
    flush = int(res.AFTER_READ in run.readings and res.AFTER_FLUSH in run.readings)
    what = f"kpctl commands held to their rule ({probes} probes, {flush} flush while stopped)"
    return Judged("KP-O8", probes + flush, what, why="no kpctl probe ran")


def _discard(run: KprofRun) -> Judged:
    """KP-O9: the bytes queued at the close, which the reopen must not show."""
    what = "bytes queued at close, held to the reopened queue"
    queued = run.reading(res.QUEUED)
    if queued is None or res.REOPENED not in run.readings:
        return Judged("KP-O9", 0, what, why="no close and reopen")
    return Judged("KP-O9", queued.stats.get("qlen", 0), what, why="no byte queued at the close")


def _kpdata(run: KprofRun) -> Judged:
    """KP-O10: the kpdata writes, each held to the records with its PC."""
    tracing = sum(len(pcs) for pcs in run.kpdata.values())
    idle = len(run.kpdata_idle)
    return Judged("KP-O10", tracing + idle,
                  f"kpdata writes ({tracing} while tracing, {idle} idle), each held to its records",
                  why="no write to kpdata")  # fmt: skip


_COUNTS: tuple[Callable[[KprofRun], Judged], ...] = (
    _accounting, _blocks, _queue, _stream, _limit, _visibility, _eof, _control, _discard,
    _kpdata, judge_nmi,
)  # fmt: skip
