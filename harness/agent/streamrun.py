"""A stream flavour's run: START, the body, STOP, the records read to the end, the counters.

The shape a new port starts from (``invoke new-flavour``): one open of the device, its
START and STOP ioctls around a body, the stream of fixed-size records read to EOF after
STOP (and, with a reader, from START by a reader racing the producers), every debugfs
file, all bracketed by the kernel's PMU interrupt counts
(`harness.agent.oracles.evidence`). The flavour gives its format and its run type; what
every such run collects (the evidence, the counters, the stream) is written here once::

    FORMAT = StreamFormat(info=INFO, decode=record_of, start="SKEL_IOC_START",
                          stop="SKEL_IOC_STOP")
    class SkelRun(StreamRun[SkelRecord]): chain_depth = DEPTH
    run = stream_run(agent, spec, FORMAT, SkelRun, body=(inject_step("all", 20),),
                     context=StreamContext(injected={0: 20, 1: 20}))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar

from harness.agent import profctl
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content import content_numbers
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.evidence import (
    IDLE_MS,
    PROC_INTERRUPTS,
    RunEvidence,
    injections_of,
    interrupt_reads,
)
from harness.agent.oracles.memo import by_identity
from harness.agent.oracles.walks import walks_of
from harness.agent.runner import AgentLike
from harness.agent.steps import (
    DEVICE,
    FD,
    GUEST_DIR,
    READ_CHUNK,
    SAMPLES,
    Named,
    Results,
    counters_of,
    counters_steps,
    require_ok,
    texts,
)
from harness.agent.truth.program import evidence_of
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import AgentCounters, flat_numbers
from harness.agent.values.samples import Sample

#: The kernel's PMU interrupt counts, read before START, right after STOP and later.
IRQ_READ = Named(profctl.cat_step(PROC_INTERRUPTS), "irq")
#: The read to the end of the stream gives up after this (it ends at once after STOP).
READ_TIMEOUT_S = 60
#: A reader concurrent with the producers (`StreamContext.reader`) stops after this; the
#: body's ``wait`` reaps it, and the read after STOP takes the rest.
READER_S = 2


class StreamRecord(Protocol):
    """A decoded record: its CPU, and itself as the shared content oracles read it."""

    @property
    def cpu(self) -> int:
        """The CPU that recorded it."""

    def sample(self) -> Sample:
        """The record as a generic sample."""


_Record = TypeVar("_Record", bound=StreamRecord)
_Record_co = TypeVar("_Record_co", bound=StreamRecord, covariant=True)  # a run only holds them


@dataclass(frozen=True, slots=True)
class StreamFormat(Generic[_Record]):
    """What differs between stream flavours: the data, the decoder, START and STOP."""

    info: FlavourInfo  # its record layout is the stream's (``info.record``)
    decode: Callable[[Mapping[str, int]], _Record]
    start: str  # the ioctl names
    stop: str

    def ioctl_step(self, name: str) -> str:
        """One of the flavour's ioctls, without an argument, on the device's descriptor."""
        ioctl = self.info.ioctl(name)
        return profctl.ioctl_step(FD, ioctl.number, ioctl.arg_size)

    @property
    def background(self) -> str:
        """The guest file a reader racing the producers writes."""
        return f"{GUEST_DIR}/{self.info.name}-background.bin"


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What a run's body does, for the oracles, and how the module is loaded for it."""

    #: CPU → producer calls the body injects (None: it injects none the oracles count).
    injected: Mapping[int, int] | None = None
    #: CPU → how many producer calls end in each outcome (recorded, each drop cause), as
    #: the harness counts them (None: it cannot; the exact run can).
    outcomes: Mapping[int, Mapping[str, int]] | None = None
    throttling_disabled: bool = True
    max_sample_rate: int | None = None
    #: Marker name → what the host does there (`harness.agent.steps.host_action_steps`).
    actions: Mapping[str, Callable[[], None]] = field(default_factory=dict)
    #: The guest's clocks count instructions (input-free runs): time budgets apply (C-3).
    instruction_clock: bool = False
    #: A reader runs from START for `READER_S`, concurrent with the producers.
    reader: bool = False


@dataclass(frozen=True, slots=True)
class StreamRun(RunEvidence, Generic[_Record_co]):
    """One START…STOP run and what the harness knows about it.

    ``samples``: every record read(2) returned, in stream order; ``bytes_read``: how
    many bytes that was; ``online_cpus``: the CPUs online when the run began;
    ``nmi_expected``: the guest booted with pseudo-NMI on; ``injected`` and
    ``outcomes``: as `StreamContext` says. A flavour's run type sets ``chain_depth``.
    """

    #: The PCs a record's chain holds (None: it records none).
    chain_depth: ClassVar[int | None] = None

    counters: AgentCounters
    samples: tuple[_Record_co, ...]
    bytes_read: int
    online_cpus: tuple[int, ...]
    nmi_expected: bool
    injected: Mapping[int, int] | None = None
    outcomes: Mapping[int, Mapping[str, int]] | None = None
    throttling_disabled: bool = True

    @property
    def core(self) -> Mapping[int, Mapping[str, int]]:
        """CPU → the core's per-CPU counters (the ``nmi`` file)."""
        return self.counters.core

    def percpu(self, cpu: int, name: str) -> int:
        """One of the flavour's per-CPU counters (the parser made sure every CPU has each)."""
        return self.counters.stats_percpu[cpu][name]

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name (`harness.agent.values.results.flat_numbers`)."""
        snap = self.counters
        flat = flat_numbers(snap.stats, snap.stats_percpu, snap.core, [s.cpu for s in self.samples])
        return flat | content_numbers(self.content())

    @by_identity  # judged by check, judged and report: made once (`memo`)
    def content(self) -> ContentView:
        """Its samples and the ground truth, for the content oracles."""
        samples = tuple(record.sample() for record in self.samples)
        walks = walks_of(self.core) if self.chain_depth is not None else ()
        return view_of(samples, self.truth, chain_depth=self.chain_depth, walks=walks)

    def records(self) -> Sequence[_Record_co]:
        """The decoded records, in stream order."""
        return self.samples

    def record(self) -> dict[str, object]:
        """The run's spec, setup and counters, for ``agent-run-NN.json``."""
        snap = self.counters
        return {
            "spec": self.spec.describe(),
            "online_cpus": self.online_cpus,
            "nmi_expected": self.nmi_expected,
            "injected": {str(c): n for c, n in (self.injected or {}).items()},
            "bytes_read": self.bytes_read,
            "info": dict(snap.info),
            "stats": dict(snap.stats),
            "stats_percpu": {str(c): dict(v) for c, v in snap.stats_percpu.items()},
            "nmi": {str(c): dict(v) for c, v in snap.core.items()},
            "state": dict(snap.state),
        }


def stream_steps(
    form: StreamFormat[_Record], body: Sequence[str], *, reader: bool = False
) -> tuple[str | Named, ...]:
    """START, ``body``, STOP, then the stream and the counters, bracketed by the evidence.

    The kernel's PMU interrupt counts are read before START, right after STOP and
    `IDLE_MS` later (IRQ and RELEASED). With ``reader``, a reader of the same open runs
    from START for `READER_S` into ``form.background``.
    """
    background = (
        profctl.timeout_step(READER_S),  # the reader's own limit: `wait` must return
        profctl.readbg_step(FD, form.background, READ_CHUNK),
        profctl.timeout_step(READ_TIMEOUT_S),
    )
    return (
        IRQ_READ, profctl.open_step(DEVICE), form.ioctl_step(form.start),
        *(background if reader else ()), *body,
        form.ioctl_step(form.stop), IRQ_READ, profctl.sleep_step(IDLE_MS), IRQ_READ,
        profctl.timeout_step(READ_TIMEOUT_S), profctl.read_step(FD, SAMPLES, READ_CHUNK),
        *counters_steps(), profctl.close_step(FD),
    )  # fmt: skip


_Run = TypeVar("_Run", bound="StreamRun[StreamRecord]")


def stream_run(
    agent: AgentLike,
    spec: AgentSpec,
    form: StreamFormat[_Record],
    kind: type[_Run],
    *,
    body: Sequence[str],
    context: StreamContext,
) -> _Run:
    """Load ``spec``, run ``body`` between START and STOP, collect and decode; the run.

    ``kind`` is the flavour's run type. Every step must succeed. Blocks for the body and
    the collection (seconds).

    :raise ModuleLoadError: the module did not load.
    :raise InfraError: a step failed, or a file the oracles need was not read.
    """
    agent.load(spec, throttling_disabled=context.throttling_disabled,
               max_sample_rate=context.max_sample_rate)  # fmt: skip
    online = agent.online_cpus()
    steps = stream_steps(form, body, reader=context.reader)
    started = time.monotonic()
    results = Results.of(steps, agent.run_steps(texts(steps), actions=context.actions))
    require_ok(results.results)
    # What the reader took while sampling, then the read after STOP: one stream, in order.
    early = b""
    if context.reader:
        early = agent.fetch(form.background, f"background-{agent.run_count:02d}.bin")
    data = early + agent.fetch(SAMPLES, f"samples-{agent.run_count:02d}.bin")
    irq, chains = [r.lines for r in results.all(IRQ_READ.name)], form.info.records_chains
    run = kind(
        spec=spec,
        counters=counters_of(results),
        samples=tuple(form.decode(v) for v in agent.decode(form.info.record.c_name, data)),
        bytes_read=len(data),
        online_cpus=online,
        nmi_expected=agent.nmi_expected_for(spec),
        injected=context.injected,
        outcomes=context.outcomes,
        throttling_disabled=context.throttling_disabled,
        kernel=interrupt_reads(irq, agent.pmu_irq_label),
        injections=injections_of(results.steps, online),
        instruction_clock=context.instruction_clock,
        truth=evidence_of(agent, results.steps, results.results, chains=chains),
        nmi_graph=agent.nmi_graph(spec.flavour),
    )
    agent.save_run({**run.record(), "runtime_s": time.monotonic() - started})
    return run
