"""What one agent run produced, as plain values for the oracles and the report.

The driver (`harness.agent.driver`) fills these from the guest; everything that
judges or shows a run (`harness.agent.oracles`, `harness.agent.report`) only
reads them, so it can be tested on hand-written values::

    snapshot = AgentSnapshot(info={...}, stats={...}, stats_percpu={0: {...}}, core={0: {...}})
    run = SamplingRun(spec=spec, snapshot=snapshot, samples=(), ...)
    violations = check_sampling(run)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.agent.spec import AgentSpec


@dataclass(frozen=True, slots=True)
class Sample:
    """One decoded tprof record (24 bytes in the stream)."""

    pid: int
    tid: int
    cpu: int
    flags: int  # bit 0: the sampled PC is a kernel address
    pc: int

    @property
    def in_kernel(self) -> bool:
        """Whether the sampled PC was in kernel space (flags bit 0)."""
        return bool(self.flags & 1)


@dataclass(frozen=True, slots=True)
class AgentSnapshot:
    """The agent's debugfs files, parsed.

    ``core`` is the ``nmi`` file: per CPU, the ground truth the core keeps before any
    flavour code runs (`harness.agent.flavours.CORE_PERCPU`). ``stats`` and
    ``stats_percpu`` are the flavour's statistics (`FlavourInfo.stats`,
    `FlavourInfo.stats_percpu`). Every CPU that was ever online has an entry in
    ``core`` and ``stats_percpu``.
    """

    info: Mapping[str, str]
    stats: Mapping[str, int]
    stats_percpu: Mapping[int, Mapping[str, int]]
    core: Mapping[int, Mapping[str, int]]
    state: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SamplingRun:
    """One START…STOP run of the agent and what the harness knows about it.

    ``injected`` maps CPU → samples injected in NMI bursts (None: no injection);
    ``busy`` maps CPU → PIDs of the pinned busy loops that ran there; ``probe_cpus``
    are the CPUs where the IRQ-off probe spun. ``nmi_expected`` is the pseudo-NMI
    mode the guest was booted with; ``throttling_disabled`` says whether the run
    switched the perf core's throttling off (`kernel.perf_cpu_time_max_percent=0`).
    ``kicks`` is the number of manual drains (None in auto drain mode).
    """

    spec: AgentSpec
    snapshot: AgentSnapshot
    samples: tuple[Sample, ...]
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


@dataclass(frozen=True, slots=True)
class Violation:
    """One oracle that did not hold: which, where, and the numbers."""

    oracle: str  # e.g. "TP-O1", "COUNT", "NMI"
    cpu: int | None  # None: a global law
    expected: str
    observed: str
    detail: str = ""

    def __str__(self) -> str:
        where = "all CPUs" if self.cpu is None else f"CPU {self.cpu}"
        text = f"{self.oracle} on {where}: expected {self.expected}, observed {self.observed}"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass(frozen=True, slots=True)
class DtEvent:
    """One decoded dt event (`harness.agent.layouts.DT_EVT`)."""

    seq: int
    ts_ns: int
    pc: int
    probe: int
    cpu: int
    pid: int
    tid: int
    flags: int
    canary: int


@dataclass(frozen=True, slots=True)
class DtOpenStats:
    """One dt open's counters at one moment (DTIOCGSTATS and DTIOC_X_PCPUSTATS).

    ``gstats`` is what DTIOCGSTATS returned (quirk DT-D1 applied by the module);
    ``percpu`` maps CPU → `FlavourInfo.stats_percpu` names of `flavours.DT`;
    ``open`` holds `flavours.DT_OPEN_STATS` (x_evtcnt, x_wakeups, x_partial_events).
    """

    gstats: Mapping[str, int]
    percpu: Mapping[int, Mapping[str, int]]
    open: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class DtRun:
    """One dt open from PRBENABLE to a drained ring, and what the harness did to it.

    ``before_read`` is taken after RECORD off, before any read; ``after_read`` once
    every readable event was read with buffers of ``read_size`` bytes. ``injected``
    maps CPU → producer calls injected in NMI bursts outside nested windows (None:
    not an injection run); ``nested`` maps CPU → producer calls that landed inside a
    nested window (each one recursion); ``skips`` maps CPU → ticks forced with the
    skip hook. ``core`` is the agent's `nmi` file at the end.
    """

    spec: AgentSpec
    before_read: DtOpenStats
    after_read: DtOpenStats
    events: tuple[DtEvent, ...]
    bytes_read: int
    read_size: int
    online_cpus: tuple[int, ...]
    core: Mapping[int, Mapping[str, int]]
    nmi_expected: bool
    injected: Mapping[int, int] | None = None
    nested: Mapping[int, int] = field(default_factory=dict)
    skips: Mapping[int, int] = field(default_factory=dict)
    reader_during_recording: bool = False  # a background reader drained while recording
