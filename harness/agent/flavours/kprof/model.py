"""What the harness knows of a kprof run before reading a counter.

Its block geometry, whether its records are countable, and the producer calls it made.

The kprof oracles (`harness.agent.flavours.kprof.oracles`) start from these numbers,
never from the agent's own counters::

    block, qlimit, size, per_block = geometry(run)    # B, Q, L, R of the run's spec
    exact(run)                                        # True: KP-O2 and KP-O3 apply
    calls_while_tracing(run)                          # {0: 6556, 1: 4370}: injected + kpdata

The block arithmetic uses B = ``cpubufsz`` and Q = ``qlimit`` from the spec (the
harness's own numbers) and uniform kernel records of depth d: s = 20 + 8d,
L = s + 1 + (1 if s < 128 else 2), R = floor((B - s - 20) / L) + 1
(`harness.agent.flavours.kprof.data.records_per_block`).
"""

from __future__ import annotations

from harness.agent.flavours.kprof.data import record_size, records_per_block
from harness.agent.flavours.kprof.results import KprofRun


def geometry(run: KprofRun) -> tuple[int, int, int, int]:
    """(B, Q, L, R) of ``run``'s spec, for uniform kernel records of its depth."""
    block, depth = run.spec.param("cpubufsz"), run.spec.param("trace_depth")
    return block, run.spec.param("qlimit"), record_size(depth), records_per_block(block, depth)


def uniform(run: KprofRun) -> bool:
    """Whether every record has the same size: depth 1, or padded to the depth."""
    return run.spec.param("trace_depth") == 1 or run.spec.param("trace_pad") == 1


def exact(run: KprofRun) -> bool:
    """An exact run: task injections only, uniform records, no reader, no flush, no status.

    An NMI burst records wherever the CPU was, user code included (type 2, 4 bytes
    longer): its records are not uniform, so bursts make a run inexact.
    """
    return (run.injected is not None and not run.spec.pmu_produce and uniform(run)
            and not run.injections.nmi
            and not run.reader_during and run.flushes == 0
            and run.spec.param("status") == 0)  # fmt: skip


def calls_while_tracing(run: KprofRun) -> dict[int, int]:
    """CPU → producer calls the harness made while tracing: injections and kpdata writes."""
    calls = dict(run.injected or {})
    for cpu, pcs in run.kpdata.items():
        calls[cpu] = calls.get(cpu, 0) + len(pcs)
    return calls
