"""What one kprof run produced, as plain values for its oracles and report.

`harness.agent.flavours.kprof.run` fills these from the guest; the oracles and
the report only read them, so they can be tested on hand-written values::

    run = KprofRun(spec=spec, readings={"final": stats, ...}, trace=(...), ...)
    check_kprof(run)                         # harness.agent.flavours.kprof.oracles
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent.flavours.kprof.data import KPROF
from harness.agent.oracles.content import content_numbers
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.evidence import RunEvidence
from harness.agent.oracles.memo import by_identity
from harness.agent.values.results import flat_numbers
from harness.agent.values.samples import Sample, callers

#: Snapshot names a run may hold, in the order they are taken.
VISIBLE_BEFORE = "visible_before"  # exact run: R records on the first CPU, no flush
VISIBLE_AFTER = "visible_after"  # exact run: one more record there
BEFORE_STOP = "before_stop"  # tracing, no flush yet (KP-O2, KP-O3, KP-O5)
AFTER_STOP = "after_stop"  # every block flushed, nothing read
AFTER_READ = "after_read"  # read to EOF
AFTER_FLUSH = "after_flush"  # `flush` while stopped (KP-O8: changes nothing)
FINAL = "final"  # kpctl closed, sources stopped: the counters are final
REOPENED = "reopened"  # kpctl opened again after a close with unread bytes (KP-O9)
QUEUED = "queued"  # before that close: bytes left on the queue


@dataclass(frozen=True, slots=True)
class KprofStats:
    """kprof's counters at one moment: the `stats` file and the `stats_percpu` file."""

    stats: Mapping[str, int]
    percpu: Mapping[int, Mapping[str, int]]

    def get(self, cpu: int, name: str) -> int:
        """Per-CPU statistic ``name`` of ``cpu`` (0 if absent)."""
        return self.percpu.get(cpu, {}).get(name, 0)

    def total(self, name: str) -> int:
        """``name`` summed over the CPUs."""
        return sum(self.get(cpu, name) for cpu in self.percpu)


@dataclass(frozen=True, slots=True)
class KprofRecord:
    """One decoded trace record of the stream (type 1 kernel, 2 user)."""

    type: int
    cpu: int
    ts_ns: int
    pcs: tuple[int, ...]
    size: int  # bytes on the wire: envelope and payload
    pid: int = 0


@dataclass(frozen=True, slots=True)
class KprofRun(RunEvidence):
    """One kprof session from kpctl open to close, and what the harness did to it.

    ``readings`` maps the names above to the counters taken there; ``core_at``
    the core's `nmi` file taken with ``final`` (before any reopen), ``core`` the
    one at the very end. ``injected`` maps CPU → producer calls the harness
    injected while tracing (task context; None: not an exact run); ``kpdata``
    maps CPU → PCs written to kpdata while tracing, ``kpdata_idle`` the PCs
    written while not tracing. ``eof`` lists the outcome of every read after
    the stream ended, in order ("0" or an errno name). ``control`` maps a
    KP-O8 probe to its outcome ("ok" or an errno name).
    """

    readings: Mapping[str, KprofStats]
    trace: tuple[KprofRecord, ...]
    bytes_read: int
    undecoded: int  # bytes at the end of the stream that form no whole record
    status_records: int
    online_cpus: tuple[int, ...]
    core: Mapping[int, Mapping[str, int]]
    core_at_final: Mapping[int, Mapping[str, int]]
    nmi_expected: bool
    injected: Mapping[int, int] | None = None
    kpdata: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    kpdata_idle: tuple[int, ...] = ()
    flushes: int = 0  # `flush` commands and CPUs taken offline while tracing, before it
    reader_during: bool = False  # a reader drained the queue while tracing
    eof: tuple[str, ...] = ()
    control: Mapping[str, str] = field(default_factory=dict)
    #: Guest clock reads (ns) just before ``start`` and just after ``stop``: every CPU
    #: traced, so recorded, only inside them (None: the run read no clock there).
    tracing_ns: tuple[int, int] | None = None

    def reading(self, name: str) -> KprofStats | None:
        """The counters taken at ``name`` (None: this run took none there)."""
        return self.readings.get(name)

    @property
    def last(self) -> KprofStats:
        """The final counters (after close), or the latest the run took."""
        for name in (FINAL, AFTER_READ, AFTER_STOP, BEFORE_STOP):
            if name in self.readings:
                return self.readings[name]
        raise KeyError("the run took no kprof reading")

    def numbers(self) -> dict[str, int]:
        """Every counter of the final reading under one flat name (`flat_numbers`)."""
        last = self.last
        flat = flat_numbers(last.stats, last.percpu, self.core, [r.cpu for r in self.trace])
        return flat | content_numbers(self.content())

    @by_identity  # judged by check, judged and report: made once (`memo`)
    def content(self) -> ContentView:
        """Its traces as samples for the content oracles.

        A trace's PCs after the first are its chain (padding zeros dropped). The record
        carries no stop cause: a trace of ``trace_depth`` PCs counts as truncated (the
        core's ``x_chain_*`` counters say why each walk stopped); a user trace carries
        the pid and no tid, a kernel trace neither (pid 0 here).
        """
        depth = self.spec.param("trace_depth")
        samples = []
        for r in self.trace:
            pcs = r.pcs if not self.spec.param("trace_pad") else tuple(p for p in r.pcs if p)
            if pcs:
                samples.append(Sample(r.cpu, pcs[0], r.pid, None, user=r.type == 2,
                                      chain=callers(pcs), truncated=len(pcs) == depth,
                                      time_ns=r.ts_ns))  # fmt: skip
        return view_of(samples, self.truth, chain_depth=depth, kernel_pids=KPROF.kernel_pids)

    def records(self) -> Sequence[KprofRecord]:
        """The decoded trace records, in stream order."""
        return self.trace
