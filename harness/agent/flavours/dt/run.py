"""Drive the dt flavour in a guest: an open, its probe, recording, the drained rings.

dt keeps its state per open, so everything of one run happens in one profctl
process on one descriptor: PRBENABLE, RECORD on, the body (injections, nested
windows, forced skips, busy loops, a background reader), RECORD off, the
counters, optionally readers racing each other on the rings, then every readable
event read with buffers of ``read_size`` bytes. dt has no EOF: the final read
ends on its timeout once the rings are empty::

    run = dt_run(agent, AgentSpec(flavour="dt", pmu_produce=False),
                 DtPlan(body=(inject_step(0, 20),), injected={0: 20}))
    check_dt(run)                        # [] when every oracle holds
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from harness.agent import profctl
from harness.agent.flavour import AgentLike
from harness.agent.flavours.dt.data import (
    DT,
    DT_EVT,
    DT_OPEN_STATS,
    DT_PCPU_HDR,
    DT_PCPU_MAX,
    DT_REQ,
    DT_STAT,
)
from harness.agent.flavours.dt.results import DtEvent, DtOpenStats, DtRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import IDLE_MS, PROC_INTERRUPTS, injections_of, interrupt_reads
from harness.agent.steps import (
    DEBUGFS,
    DEVICE,
    FD,
    GUEST_DIR,
    Named,
    Results,
    fault_step,
    named,
    parse_percpu,
    require_ok,
    texts,
)
from harness.agent.truth.program import (
    TruthLaunch,
    evidence_of,
    launch_steps,
    output_steps,
)
from harness.errors import AgentStepError, InfraError

PROBE_PROFILE = 1
#: The profile probe's period a run enables it with (DTIOCPRBENABLE), unless its plan says.
PROFILE_PERIOD_NS = 1_000_000
#: The kernel's PMU interrupt counts (`harness.agent.oracles.evidence`), read three times.
IRQ_READ = Named(profctl.cat_step(PROC_INTERRUPTS), "irq")
#: The core's per-CPU counters, read last before the close: the run's `core`.
NMI_CAT = Named(profctl.cat_step(f"{DEBUGFS}/nmi"), "core")
#: The counters' names before and after the final drain (`collect_steps`, `open_stats`).
BEFORE_READ, AFTER_READ = "before_read", "after_read"
EVENTS = f"{GUEST_DIR}/dt-events.bin"
BACKGROUND = f"{GUEST_DIR}/dt-background.bin"
#: How long the final read waits on empty rings before it counts as drained.
DRAIN_TIMEOUT_S = 1
#: The racing readers' files: ``{RACER}-<n>.bin`` and ``.status``.
RACER = f"{GUEST_DIR}/dt-racer"
_IOCTL = re.compile(rf"^ioctl:{FD}:(0x[0-9a-f]+):")
_NEST = re.compile(rf"^write:{re.escape(DEBUGFS)}/nest:cpu=(\d+) count=\d+$")


@dataclass(frozen=True, slots=True)
class DtPlan:
    """What a dt run does between RECORD on and off, and what that means for the oracles."""

    body: tuple[str, ...] = ()
    injected: Mapping[int, int] | None = None
    nested: Mapping[int, int] = field(default_factory=dict)
    skips: Mapping[int, int] = field(default_factory=dict)
    read_size: int = DT_EVT.size * 64
    period_ns: int = PROFILE_PERIOD_NS
    background_reader: bool = False
    background_s: int = 4  # the background reader stops after this, drained or not
    #: The background reader sleeps this long after a read that emptied the rings
    #: (0: it blocks in read at once, woken by the next event).
    background_pause_ms: int = 0
    #: Readers racing each other on the rings after RECORD off, before the final
    #: drain (0: none), each ending on ``racer_s``; ``copy_fault`` arms the module's
    #: ``dt_copyout`` fault point first: that copy fails as on an unmapped page (a
    #: racer's read, never the final drain's: give ``racers`` of 1 or more with it).
    racers: int = 0
    racer_s: int = 2
    copy_fault: int | None = None
    #: Marker name → what the host does there (see `Agent.steps_with_host_actions`).
    actions: Mapping[str, Callable[[], None]] = field(default_factory=dict)
    #: Ground-truth workloads launched before the body; their output is read after `wait`.
    truth: tuple[TruthLaunch, ...] = ()


def dt_ioctl_step(name: str, data: bytes = b"") -> str:
    """A dt ioctl on the run's descriptor."""
    ioctl = DT.ioctl(name)
    return profctl.ioctl_step(FD, ioctl.number, ioctl.arg_size, data)


def probe_request(probe: int = PROBE_PROFILE, period_ns: int = PROFILE_PERIOD_NS) -> bytes:
    """DTIOCPRBENABLE/DISABLE's argument."""
    return struct.pack(DT_REQ.struct_format, probe, 0, period_ns)


def record_step(on: bool) -> str:
    """DTIOCRECORD on or off."""
    return dt_ioctl_step("DTIOCRECORD", struct.pack("<i", int(on)))


def pcpustats_step() -> str:
    """DTIOC_X_PCPUSTATS into a buffer as large as profctl passes."""
    header = struct.pack(DT_PCPU_HDR.struct_format, DT_PCPU_MAX, 0, 0, 0)
    return dt_ioctl_step("DTIOC_X_PCPUSTATS", header)


def skip_step(cpu: int, count: int) -> str:
    """The next producer call on ``cpu`` counts ``count`` skipped ticks."""
    return profctl.write_step(f"{DEBUGFS}/skip", f"cpu={cpu} count={count}")


def nest_step(cpu: int, count: int) -> str:
    """A window on ``cpu`` inside a get, holding a burst of ``count`` producer calls."""
    return profctl.write_step(f"{DEBUGFS}/nest", f"cpu={cpu} count={count}")


def start_steps(period_ns: int) -> tuple[str, ...]:
    """Open, enable the profile probe, record."""
    enable = dt_ioctl_step("DTIOCPRBENABLE", probe_request(PROBE_PROFILE, period_ns))
    return (profctl.open_step(DEVICE), enable, record_step(True))


def reprobe_steps(period_ns: int = PROFILE_PERIOD_NS) -> tuple[str, ...]:
    """RECORD off, the profile probe disabled and enabled again, RECORD on: body steps.

    Fixed, the disable removes the probe and the enable succeeds; the seed's DT-D10
    (a no-op disable) makes the enable fail with EEXIST, and `dt_run` then raises.
    """
    request = probe_request(PROBE_PROFILE, period_ns)
    return (record_step(False), dt_ioctl_step("DTIOCPRBDISABLE", request),
            dt_ioctl_step("DTIOCPRBENABLE", request), record_step(True))  # fmt: skip


def racer_steps(plan: DtPlan) -> tuple[str, ...]:
    """``plan.racers`` background readers of the run's descriptor, then `wait` for them."""
    if not plan.racers:
        return ()
    fault = () if plan.copy_fault is None else (fault_step("dt_copyout", plan.copy_fault),)
    readers = tuple(
        profctl.readbg_step(FD, f"{RACER}-{n}.bin", plan.read_size) for n in range(plan.racers)
    )
    # `wait` outlasts the readers' own limit, after which they must end.
    wait = (profctl.timeout_step(plan.racer_s + 60), profctl.wait_step())
    return (*fault, profctl.timeout_step(plan.racer_s), *readers, *wait)


def nest_windows(steps: Iterable[str]) -> dict[int, int]:
    """CPU → nested windows ``steps`` open there (`nest_step`), each one get of its own."""
    windows: dict[int, int] = {}
    for step in steps:
        if found := _NEST.match(step):
            cpu = int(found[1])
            windows[cpu] = windows.get(cpu, 0) + 1
    return windows


def counters_steps(name: str) -> tuple[Named, ...]:
    """DTIOCGSTATS and DTIOC_X_PCPUSTATS, named ``name.gstats`` and ``name.pcpu``."""
    return (Named(dt_ioctl_step("DTIOCGSTATS"), f"{name}.gstats"),
            Named(pcpustats_step(), f"{name}.pcpu"))  # fmt: skip


def collect_steps(read_size: int, racers: tuple[str, ...] = ()) -> tuple[str | Named, ...]:
    """RECORD off, then the rest of the run's evidence, and close.

    The kernel's PMU interrupt counts right after RECORD off and `IDLE_MS` later,
    the counters (`BEFORE_READ`), the ``racers`` steps (`racer_steps`), every ring
    drained (``drain``), the counters again (`AFTER_READ`).
    """
    return (
        record_step(False),
        IRQ_READ,
        profctl.sleep_step(IDLE_MS),
        IRQ_READ,
        *counters_steps(BEFORE_READ),
        *racers,
        profctl.timeout_step(DRAIN_TIMEOUT_S),
        *named("drain", profctl.read_step(FD, EVENTS, read_size)),
        *counters_steps(AFTER_READ),
        NMI_CAT,
        profctl.close_step(FD),
    )


def require_dt_ioctls(results: Results) -> None:
    """Raise on the first of dt's own ioctls that failed: the module refused a valid call.

    Every dt ioctl of a run is one the port must accept where the run makes it (after
    RECORD off, a disable then an enable of the profile probe), so a failure is the
    module's behaviour, possibly the defect reproduced, not the host's.

    :raise AgentStepError: naming the ioctl, its errno and the step (a `GuestError`).
    """
    names = {ioctl.number: ioctl.name for ioctl in DT.ioctls}
    for step, result in results.pairs():
        found = _IOCTL.match(step)
        if found and not result.ok and int(found[1], 16) in names:
            name = names[int(found[1], 16)]
            raise AgentStepError(f"dt ioctl {name} failed with {result.errno}: {result.describe()}")


def parse_pcpustats(data: bytes) -> tuple[dict[int, dict[str, int]], dict[str, int]]:
    """DTIOC_X_PCPUSTATS's buffer → (CPU → per-CPU counters, per-open counters).

    :raise InfraError: the header does not match the counters this harness knows.
    """
    _, ncpu, nstats, nopen = struct.unpack_from(DT_PCPU_HDR.struct_format, data)
    names = DT.percpu_names
    if nstats != len(names) or nopen != len(DT_OPEN_STATS):
        raise InfraError(f"the agent reports {nstats}+{nopen} dt counters, expected "
                         f"{len(names)}+{len(DT_OPEN_STATS)}: a stale build?")  # fmt: skip
    values = struct.unpack_from(f"<{ncpu * nstats + nopen}Q", data, DT_PCPU_HDR.size)
    percpu = {
        cpu: dict(zip(names, values[cpu * nstats : (cpu + 1) * nstats], strict=True))
        for cpu in range(ncpu)
    }
    per_open = dict(zip((n for n, _ in DT_OPEN_STATS), values[ncpu * nstats :], strict=True))
    return percpu, per_open


def open_stats(results: Results, name: str) -> DtOpenStats:
    """The counters ``name`` read (`counters_steps`): DTIOCGSTATS and DTIOC_X_PCPUSTATS."""
    values = struct.unpack(DT_STAT.struct_format, results.one(f"{name}.gstats").out_bytes)
    percpu, per_open = parse_pcpustats(results.one(f"{name}.pcpu").out_bytes)
    return DtOpenStats(dict(zip(DT_STAT.names, values, strict=True)), percpu, per_open)


def decode_events(agent: AgentLike, data: bytes) -> tuple[DtEvent, ...]:
    """Whole dt events of ``data`` with the rendered decoder (a partial tail is dropped)."""
    whole = len(data) - len(data) % DT_EVT.size
    return tuple(event_from(e) for e in agent.decode(DT_EVT.c_name, data[:whole]))


def event_from(record: Mapping[str, int]) -> DtEvent:
    """One decoded record as a `DtEvent`: its stacks' elements gathered into tuples."""
    plain = {name: value for name, value in record.items() if "[" not in name}
    return DtEvent(**plain, kstack=DT_EVT.array(record, "kstack"),
                   ustack=DT_EVT.array(record, "ustack"))  # fmt: skip


def wait_limit_s(reader_s: int, command_s: float) -> int:
    """How long the `wait` after a background reader may take, in seconds.

    The reader's limit and a minute, or half the guest's command budget where that is
    longer (a scaled budget: a host shared with another guest, a sanitizer kernel).
    """
    return max(reader_s + 60, int(command_s / 2))


def dt_run(agent: AgentLike, spec: AgentSpec, plan: DtPlan) -> DtRun:
    """Load ``spec`` (flavour dt), run ``plan`` on one open, collect and decode.

    :raise AgentStepError: a step failed: one of dt's ioctls (`require_dt_ioctls`,
        naming it) or another.
    :raise InfraError: the drain read failed otherwise than by its timeout.
    """
    agent.load(spec)  # throttling off: exact counts
    online = agent.online_cpus()
    background = (
        # The reader's own time limit: it must end for `wait` to return.
        (
            profctl.timeout_step(plan.background_s),
            profctl.readbg_step(FD, BACKGROUND, plan.read_size, plan.background_pause_ms),
            # `wait` outlasts the reader's limit, and the busy loops and workloads the
            # guest's budget allows (a loaded host: 64 s cut the noisy neighbour's run).
            profctl.timeout_step(wait_limit_s(plan.background_s, agent.timeouts.command_s)),
        )
        if plan.background_reader
        else ()
    )
    steps = (
        IRQ_READ,
        *start_steps(plan.period_ns),
        *background,
        *launch_steps(plan.truth),
        *plan.body,
        profctl.wait_step(),
        *output_steps(plan.truth),
        *collect_steps(plan.read_size, racer_steps(plan)),
    )
    results = Results.of(steps, agent.run_steps(texts(steps), actions=plan.actions))
    drain = results.one("drain")
    if not drain.ok and drain.errno != "EINTR":
        raise InfraError(f"dt drain read failed: {drain.describe()}")
    require_dt_ioctls(results)
    require_ok([r for r in results.results if r is not drain])
    reads = [r.lines for r in results.all(IRQ_READ.name)]
    status = _reader_status(agent) if plan.background_reader else None
    # In the order they read: the background reader while recording, the racers
    # after RECORD off, the final drain last (one reader's seqs must rise: DT-O3).
    streams = [(BACKGROUND, "dt-background.bin")] if plan.background_reader else []
    streams += [(f"{RACER}-{n}.bin", f"dt-racer-{n}.bin") for n in range(plan.racers)]
    streams.append((EVENTS, "dt-events.bin"))
    data = [agent.fetch(remote, name) for remote, name in streams]
    return DtRun(
        spec=spec,
        before_read=open_stats(results, BEFORE_READ),
        after_read=open_stats(results, AFTER_READ),
        events=tuple(e for chunk in data for e in decode_events(agent, chunk)),
        bytes_read=sum(map(len, data)),
        read_size=plan.read_size,
        online_cpus=online,
        core=parse_percpu(results.one(NMI_CAT.name).lines),
        nmi_expected=agent.nmi_expected_for(spec),
        injected=plan.injected,
        nested=plan.nested,
        windows=nest_windows(results.steps),
        skips=plan.skips,
        concurrent_readers=plan.racers,
        reader_during_recording=plan.background_reader,
        background_errno=None if status is None else status.errno,
        background_reads=0 if status is None else status.reads,
        kernel=interrupt_reads(reads, agent.pmu_irq_label),
        injections=injections_of(results.steps, online),
        truth=evidence_of(agent, results.steps, results.results, chains=DT.records_chains),
        nmi_graph=agent.nmi_graph(spec.flavour),
    )


@dataclass(frozen=True, slots=True)
class ReaderStatus:
    """How a background reader ended (``errno``) and its ``reads`` that returned bytes."""

    errno: str
    reads: int


def parse_reader_status(text: str) -> ReaderStatus:
    """A reader's status file (``bytes=N reads=N errno=E``); a missing field says so."""
    fields = dict(part.partition("=")[::2] for part in text.split())
    reads = fields.get("reads", "")
    return ReaderStatus(errno=fields.get("errno", f"no errno in {text.strip()!r}"),
                        reads=int(reads) if reads.isdigit() else 0)  # fmt: skip


def _reader_status(agent: AgentLike) -> ReaderStatus:
    """The background reader's status file, fetched and parsed."""
    return parse_reader_status(agent.fetch(f"{BACKGROUND}.status", "dt-background.status").decode())
