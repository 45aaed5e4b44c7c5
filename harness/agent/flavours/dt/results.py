"""What one dt run produced, as plain values for its oracles and report.

`harness.agent.flavours.dt.run` fills these from the guest; the oracles and the
report only read them, so they can be tested on hand-written values::

    run = DtRun(spec=spec, before_read=stats, after_read=stats, events=(), ...)
    check_dt(run)                            # harness.agent.flavours.dt.oracles
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent.evidence import Injections, KernelEvidence
from harness.agent.peer import PeerEvidence
from harness.agent.results import flat_numbers
from harness.agent.spec import AgentSpec


@dataclass(frozen=True, slots=True)
class DtEvent:
    """One decoded dt event (`harness.agent.flavours.dt.data.DT_EVT`)."""

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
    ``percpu`` maps CPU → `FlavourInfo.stats_percpu` names of `data.DT`;
    ``open`` holds `data.DT_OPEN_STATS` (x_evtcnt, x_wakeups, x_partial_events).
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
    nested window (each one recursion); ``windows`` maps CPU → nested windows the
    harness opened there (each one get outside the producer); ``skips`` maps CPU →
    ticks forced with the skip hook. ``concurrent_readers`` readers (2 or more: racing
    each other) drained the rings after RECORD off, before the final drain; their
    events come first in ``events``, each reader's in its own read order. ``core`` is
    the agent's `nmi` file at the end.
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
    windows: Mapping[int, int] = field(default_factory=dict)
    skips: Mapping[int, int] = field(default_factory=dict)
    concurrent_readers: int = 0
    reader_during_recording: bool = False  # a background reader drained while recording
    #: How the background reader ended (its status file's errno; None: no reader).
    background_errno: str | None = None
    #: PMU interrupts the guest kernel counted around the run (None: not read).
    kernel: KernelEvidence | None = None
    #: What the harness's steps injected, per CPU (the CALLS oracle's evidence).
    injections: Injections = field(default_factory=Injections)
    #: Linux perf beside the agent (the peer run; None: no peer).
    peer: PeerEvidence | None = None

    def numbers(self) -> dict[str, int]:
        """Every counter after the drain under one flat name (`flat_numbers`)."""
        after = self.after_read
        return flat_numbers(after.gstats, after.percpu, self.core, [e.cpu for e in self.events])

    def records(self) -> Sequence[DtEvent]:
        """The decoded events, in read order."""
        return self.events
