"""What one tprof run produced, as plain values for its oracles and report.

`harness.agent.flavours.tprof.run` fills these from the guest; the oracles and
the report only read them, so they can be tested on hand-written values::

    run = TprofRun(spec=spec, counters=counters, samples=(), ...)
    check_tprof(run)                      # harness.agent.flavours.tprof.oracles
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.agent.streamrun import StreamRun
from harness.agent.values.samples import Sample

#: Bit 0 of a tprof record's flags: the sampled PC is a kernel address (the seed's format).
KERNEL_FLAG = 1


@dataclass(frozen=True, slots=True)
class TprofRecord:
    """One decoded tprof record (24 bytes in the stream)."""

    pid: int
    tid: int
    cpu: int
    flags: int  # KERNEL_FLAG: the sampled PC is a kernel address
    pc: int

    @property
    def in_kernel(self) -> bool:
        """Whether the sampled PC was in kernel space (`KERNEL_FLAG`)."""
        return bool(self.flags & KERNEL_FLAG)

    def sample(self) -> Sample:
        """The record as the shared content oracles read it (no chain)."""
        return Sample(self.cpu, self.pc, self.pid, self.tid, user=not self.in_kernel)


@dataclass(frozen=True, slots=True)
class TprofRun(StreamRun[TprofRecord]):
    """One START…STOP run of the agent and what the harness knows about it.

    A stream run (`harness.agent.streamrun.StreamRun`: the counters, the records, the
    evidence) with tprof's own setup: ``busy`` maps CPU → PIDs of the pinned busy loops
    that ran there; ``probe_cpus`` are the CPUs where the IRQ-off probe spun;
    ``throttling_disabled`` says whether the run switched the perf core's throttling off
    (`kernel.perf_cpu_time_max_percent=0`); ``kicks`` is the number of manual drains
    (None in auto drain mode). tprof records no chain.
    """

    busy: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    probe_cpus: tuple[int, ...] = ()
    kicks: int | None = None
    runtime_s: float = 0.0
    #: Events the PMU counts per nanosecond its event is enabled, where that is
    #: a fixed rate (cycles under TCG); None: overflows due cannot be derived.
    ref_events_per_ns: float | None = None
    #: Where the busy loops run once pinned (profctl's ``spin_loop``); (0, 0): not known.
    spin_loop: tuple[int, int] = (0, 0)

    def record(self) -> dict[str, object]:
        """The stream run's record (`StreamRun.record`) and tprof's setup."""
        return {
            **StreamRun.record(self),
            "busy": {str(cpu): pids for cpu, pids in self.busy.items()},
            "throttling_disabled": self.throttling_disabled,
            "kicks": self.kicks,
            "runtime_s": self.runtime_s,
        }
