"""What one dt run produced, as plain values for its oracles and report.

`harness.agent.flavours.dt.run` fills these from the guest; the oracles and the
report only read them, so they can be tested on hand-written values::

    run = DtRun(spec=spec, before_read=stats, after_read=stats, events=(), ...)
    check_dt(run)                            # harness.agent.flavours.dt.oracles
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent.flavours.dt.data import DT_STACK_MAX
from harness.agent.oracles.content import content_numbers
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.evidence import RunEvidence
from harness.agent.oracles.memo import by_identity
from harness.agent.oracles.walks import walks_of
from harness.agent.values.results import flat_numbers
from harness.agent.values.samples import Sample, callers

#: enum pa_chain_stop's PA_CHAIN_TRUNCATED (profagent.h): the walk reached the depth.
CHAIN_TRUNCATED = 1


#: Bit 0 of a dt event's flags: the sampled PC is a kernel address (the seed's format).
KERNEL_FLAG = 1


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
    kstack_n: int = 0
    ustack_n: int = 0
    kstack_stop: int = 0
    ustack_stop: int = 0
    kstack: tuple[int, ...] = ()  # DT_STACK_MAX PCs, the first kstack_n recorded
    ustack: tuple[int, ...] = ()

    def sample(self) -> Sample:
        """The event as a generic sample: its PC, and the chain of its PC's own stack.

        A kernel event's chain is its kernel stack after the PC, a user event's its
        user stack after the PC; truncated when that walk stopped at the depth.
        """
        user = not self.flags & KERNEL_FLAG
        n, pcs, stop = ((self.ustack_n, self.ustack, self.ustack_stop) if user
                        else (self.kstack_n, self.kstack, self.kstack_stop))  # fmt: skip
        return Sample(self.cpu, self.pc, self.pid, self.tid, user=user,
                      chain=callers(pcs[:n]), truncated=stop == CHAIN_TRUNCATED,
                      time_ns=self.ts_ns, length=n, stop=stop,
                      user_walk=() if user else self.ustack[: self.ustack_n],
                      user_stop=None if user else self.ustack_stop)  # fmt: skip


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
class DtRun(RunEvidence):
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
    #: The background reader's reads that returned bytes (its status file's ``reads``).
    background_reads: int = 0

    def numbers(self) -> dict[str, int]:
        """Every counter after the drain, and the content counts, under flat names."""
        after = self.after_read
        flat = flat_numbers(after.gstats, after.percpu, self.core, [e.cpu for e in self.events])
        return flat | content_numbers(self.content())

    @by_identity  # judged by check, judged and report: made once (`memo`)
    def content(self) -> ContentView:
        """Its events as samples for the content oracles (chains of `DT_STACK_MAX` PCs)."""
        return view_of([e.sample() for e in self.events], self.truth, chain_depth=DT_STACK_MAX,
                       walks=walks_of(self.core))  # fmt: skip

    def records(self) -> Sequence[DtEvent]:
        """The decoded events, in read order."""
        return self.events
