"""What one tprof run produced, as plain values for its oracles and report.

`harness.agent.flavours.tprof.run` fills these from the guest; the oracles and
the report only read them, so they can be tested on hand-written values::

    run = TprofRun(spec=spec, counters=counters, samples=(), ...)
    check_tprof(run)                      # harness.agent.flavours.tprof.oracles
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.agent.oracles.content import content_numbers
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.evidence import RunEvidence
from harness.agent.values.results import AgentCounters, flat_numbers
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


@dataclass(frozen=True, slots=True)
class TprofRun(RunEvidence):
    """One START…STOP run of the agent and what the harness knows about it.

    ``injected`` maps CPU → samples injected in NMI bursts (None: no injection);
    ``busy`` maps CPU → PIDs of the pinned busy loops that ran there; ``probe_cpus``
    are the CPUs where the IRQ-off probe spun. ``nmi_expected`` is the pseudo-NMI
    mode the guest was booted with; ``throttling_disabled`` says whether the run
    switched the perf core's throttling off (`kernel.perf_cpu_time_max_percent=0`).
    ``kicks`` is the number of manual drains (None in auto drain mode).
    """

    counters: AgentCounters
    samples: tuple[TprofRecord, ...]
    bytes_read: int
    online_cpus: tuple[int, ...]
    busy: Mapping[int, tuple[int, ...]]
    probe_cpus: tuple[int, ...]
    nmi_expected: bool
    throttling_disabled: bool
    injected: Mapping[int, int] | None = None
    kicks: int | None = None
    runtime_s: float = 0.0
    #: Events the PMU counts per nanosecond its event is enabled, where that is
    #: a fixed rate (cycles under TCG); None: overflows due cannot be derived.
    ref_events_per_ns: float | None = None
    #: Where the busy loops run once pinned (profctl's ``spin_loop``); (0, 0): not known.
    spin_loop: tuple[int, int] = (0, 0)

    @property
    def core(self) -> Mapping[int, Mapping[str, int]]:
        """CPU → the core's per-CPU counters, as the counters read them."""
        return self.counters.core

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name (see `harness.agent.values.results.flat_numbers`)."""
        snap = self.counters
        cpus = [s.cpu for s in self.samples]
        flat = flat_numbers(snap.stats, snap.stats_percpu, snap.core, cpus)
        return flat | content_numbers(self.content())

    def content(self) -> ContentView:
        """Its samples and ground truth, for the content oracles (tprof records no chain)."""
        samples = tuple(
            Sample(s.cpu, s.pc, s.pid, s.tid, user=not s.in_kernel) for s in self.samples
        )
        return view_of(samples, self.truth, chain_depth=None)

    def records(self) -> Sequence[TprofRecord]:
        """The decoded samples, in stream order."""
        return self.samples

    def record(self) -> dict[str, object]:
        """The run's spec, setup and counters, for ``agent-run-NN.json``."""
        snap = self.counters
        return {
            "spec": self.spec.describe(),
            "online_cpus": self.online_cpus,
            "busy": {str(cpu): pids for cpu, pids in self.busy.items()},
            "nmi_expected": self.nmi_expected,
            "throttling_disabled": self.throttling_disabled,
            "injected": {str(c): n for c, n in (self.injected or {}).items()},
            "kicks": self.kicks,
            "runtime_s": self.runtime_s,
            "bytes_read": self.bytes_read,
            "info": dict(snap.info),
            "stats": dict(snap.stats),
            "stats_percpu": {str(c): dict(v) for c, v in snap.stats_percpu.items()},
            "nmi": {str(c): dict(v) for c, v in snap.core.items()},
            "state": dict(snap.state),
        }
