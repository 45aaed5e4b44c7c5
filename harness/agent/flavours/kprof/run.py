"""Drive the kprof flavour in a guest: one kpctl session, its stream, its counters.

Everything of one run happens in one profctl process: kpctl (fd 3, exclusive;
its open arms the sources) and kpdata (fd 4) are opened, ``start`` written, the
body run (injections, busy loops, kpdata writes, snapshots), ``stop`` written,
the queue read to its end and a few reads past it, kpctl closed (the sources
stop). Optional probes (KP-O8, KP-O9) follow; the kernel's PMU interrupt counts
bracket it all::

    plan = KprofPlan(body=(inject_step(0, 5, ctx="task"),), injected={0: 5})
    run = kprof_run(agent, AgentSpec(flavour="kprof", pmu_produce=False), plan)
    check_kprof(run)                       # [] when every oracle holds
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent import profctl
from harness.agent.flavour import AgentLike
from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.kprof.results import KprofRecord, KprofRun, KprofStats
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import IDLE_MS, PROC_INTERRUPTS, injections_of, interrupt_reads
from harness.agent.steps import (
    DEBUGFS,
    GUEST_DIR,
    Named,
    Results,
    named,
    parse_pairs,
    parse_percpu,
    require_names,
    texts,
)
from harness.agent.truth.program import evidence_of
from harness.errors import AgentStepError, InfraError

KPROF_DIR = f"{DEBUGFS}/kprof"
KPCTL = f"{KPROF_DIR}/kpctl"
KPDATA = f"{KPROF_DIR}/kpdata"
KPTRACE = f"{KPROF_DIR}/kptrace"
CTL_FD = 3
DATA_FD = 4
#: The kernel's PMU interrupt counts (`harness.agent.oracles.evidence`), read three times.
IRQ_READ = Named(profctl.cat_step(PROC_INTERRUPTS), "irq")
STREAM = f"{GUEST_DIR}/kprof-stream.bin"
BACKGROUND = f"{GUEST_DIR}/kprof-background.bin"
EOF_FILE = f"{GUEST_DIR}/kprof-eof.bin"
#: Reads made past the end of the stream (KP-O7: quirk KP-D11 fails the 4th).
EOF_READS = 4
#: A read size that is no multiple of any record's: records split across reads.
READ_SIZE = 4000
#: How long the drain read may take before the run is judged hung.
DRAIN_TIMEOUT_S = 60
READING = "reading:"  # a pseudo-step in a plan's body: take the counters here
#: The names of the reads whose outcome is judged, not required: the read to the end
#: of the stream, those past it, and the KP-O8 probes (``control:<probe>``).
DRAIN, PAST_EOF, CONTROL = "drain", "past_eof", "control:"

#: KP-O8 probes: (name, step) after the stream was read, kpctl still open and stopped.
CONTROL_PROBES: tuple[tuple[str, str], ...] = (
    ("cpubufsz_8", profctl.writefd_step(CTL_FD, "prof_cpubufsz 8")),
    ("cpubufsz_2048", profctl.writefd_step(CTL_FD, "prof_cpubufsz 2048")),
    ("unknown", profctl.writefd_step(CTL_FD, "bogus")),
    ("empty", profctl.writefd_step(CTL_FD, "")),
    ("second_open", profctl.open_step(KPCTL)),
    ("qlimit_stopped", profctl.writefd_step(CTL_FD, "prof_qlimit 2048")),
    ("start", profctl.writefd_step(CTL_FD, "start")),
    ("start_again", profctl.writefd_step(CTL_FD, "start")),
    ("qlimit_profiling", profctl.writefd_step(CTL_FD, "prof_qlimit 2048")),
    ("stop", profctl.writefd_step(CTL_FD, "stop")),
)


def reading(name: str) -> str:
    """A body step that takes the counters under ``name`` (see `harness...kprof.results`)."""
    return f"{READING}{name}"


def ctl_step(command: str) -> str:
    """One kpctl command on the session's descriptor."""
    return profctl.writefd_step(CTL_FD, command)


def kpdata_steps(cpu: int, pc_value: int) -> tuple[str, ...]:
    """Write ``pc_value`` to kpdata from ``cpu`` (profctl pinned there)."""
    return (profctl.pin_step(cpu), profctl.writefd_step(DATA_FD, f"{pc_value:#x}"))


@dataclass(frozen=True, slots=True)
class KprofPlan:
    """What a kprof session does, and what that means for the oracles.

    ``body`` runs while tracing (it may hold `reading` steps and ``flush``
    commands); ``injected`` is CPU → task-context producer calls in it (None:
    not an exact run); ``kpdata`` CPU → PCs written to kpdata while tracing
    (their steps are added before the before-stop reading), ``kpdata_idle``
    PCs written from CPU 0 before ``start``. ``control`` appends the KP-O8 and
    KP-O9 probes.
    """

    body: tuple[str, ...] = ()
    injected: Mapping[int, int] | None = None
    kpdata: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    kpdata_idle: tuple[int, ...] = ()
    background_reader: bool = False
    read_size: int = READ_SIZE
    control: bool = False
    #: After the session's close, kpctl opened again: a first attempt may fail (an armed
    #: ``queue_alloc`` fault's ENOMEM), the second must open (KP-D5: it cannot).
    reopen: bool = False
    actions: Mapping[str, Callable[[], None]] = field(default_factory=dict)


def session_steps(plan: KprofPlan) -> tuple[str | Named, ...]:
    """The session: open, start, body, kpdata writes, stop, the reads, close.

    A clock read comes just before ``start`` and just after ``stop`` (``tracing``): the
    span in which any CPU traced (`KprofRun.tracing_ns`).
    """
    tracing = Named(profctl.clock_step(), "tracing")
    idle = tuple(s for value in plan.kpdata_idle for s in kpdata_steps(0, value))
    writes = tuple(s for cpu, pcs in sorted(plan.kpdata.items()) for v in pcs
                   for s in kpdata_steps(cpu, v))  # fmt: skip
    reader = (
        (profctl.readbg_step(DATA_FD, BACKGROUND, plan.read_size),)
        if plan.background_reader
        else ()
    )
    return (
        profctl.open_step(KPCTL), profctl.open_step(KPDATA), *idle, *reader, tracing,
        ctl_step("start"),
        *plan.body, *writes, reading(res.BEFORE_STOP), ctl_step("stop"), tracing,
        reading(res.AFTER_STOP), profctl.timeout_step(DRAIN_TIMEOUT_S),
        *((profctl.wait_step(),) if plan.background_reader else ()),
        *named(DRAIN, profctl.read_step(DATA_FD, STREAM, plan.read_size)),
        *named(PAST_EOF, *(profctl.read_step(DATA_FD, EOF_FILE, plan.read_size)
                           for _ in range(EOF_READS))),
        reading(res.AFTER_READ), *(_control_steps() if plan.control else ()),
        profctl.close_step(DATA_FD), profctl.close_step(CTL_FD), reading(res.FINAL),
        Named(profctl.cat_step(f"{DEBUGFS}/nmi"), "core_at_final"),
        *(_reopen_steps() if plan.control else ()),
        *(retry_open_steps() if plan.reopen else ()),
    )  # fmt: skip


def retry_open_steps() -> tuple[str, ...]:
    """Open and close kpctl twice: the first round may fail, the second must not.

    The session closed its descriptors before, so the open takes `CTL_FD` again.
    """
    return (profctl.repeat_step(2, 2), profctl.open_step(KPCTL), profctl.close_step(CTL_FD))


def _control_steps() -> tuple[str | Named, ...]:
    """KP-O8: flush while stopped changes nothing, then the probes (``control:<probe>``)."""
    probes = (Named(step, f"{CONTROL}{name}") for name, step in CONTROL_PROBES)
    return (ctl_step("flush"), reading(res.AFTER_FLUSH), *probes)


def _reopen_steps() -> tuple[str, ...]:
    """KP-O9: one record flushed onto the queue, close with it unread, reopen."""
    return (
        profctl.open_step(KPCTL), ctl_step("start"), _one_task_injection(), ctl_step("flush"),
        reading(res.QUEUED), profctl.close_step(CTL_FD), profctl.open_step(KPCTL),
        reading(res.REOPENED), profctl.close_step(CTL_FD),
    )  # fmt: skip


def _one_task_injection() -> str:
    return profctl.write_step(f"{DEBUGFS}/inject", "cpu=0 count=1 ctx=task")


def expand(steps: Sequence[str | Named]) -> tuple[tuple[str | Named, ...], tuple[str, ...]]:
    """Replace each `reading` pseudo-step by its two ``cat`` steps (`reading_steps`).

    Returns the steps and the readings' names, in order.
    """
    out: list[str | Named] = []
    names: list[str] = []
    for step in steps:
        if isinstance(step, str) and step.startswith(READING):
            names.append(step.removeprefix(READING))
            out += reading_steps(names[-1])
        else:
            out.append(step)
    return tuple(out), tuple(names)


def reading_steps(name: str) -> tuple[Named, Named]:
    """The ``stats`` and ``stats_percpu`` cats of reading ``name``, named for `parse_stats`."""
    stats, percpu = (profctl.cat_step(f"{DEBUGFS}/{file}") for file in ("stats", "stats_percpu"))
    return Named(stats, f"{READING}{name}.stats"), Named(percpu, f"{READING}{name}.percpu")


def parse_stats(results: Results, name: str) -> KprofStats:
    """Reading ``name`` from its ``stats`` and ``stats_percpu`` cats (`reading_steps`).

    :raise InfraError: a cat failed, or a counter kprof declares is missing.
    """
    stats = results.one(f"{READING}{name}.stats")
    percpu = results.one(f"{READING}{name}.percpu")
    if not stats.ok or not percpu.ok:
        raise InfraError(f"kprof reading failed: {stats.describe()}; {percpu.describe()}")
    values = {k: int(v) for k, v in parse_pairs(stats.lines).items()}
    table = parse_percpu(percpu.lines)
    require_names("stats", [(None, values)], KPROF.stat_names)
    require_names("stats_percpu", sorted(table.items()), KPROF.percpu_names)
    return KprofStats(values, table)


def decode_stream(agent: AgentLike, data: bytes) -> tuple[tuple[KprofRecord, ...], int, int]:
    """The trace records of ``data``, the status records counted, the bytes left undecoded."""
    found, used = agent.decode_framed(data)
    trace: list[KprofRecord] = []
    status = 0
    for record in found:
        if record["type"] not in (1, 2):
            status += 1
            continue
        pcs = record["pcs"]
        assert isinstance(pcs, list)
        n = len(pcs)
        size = (KPROF.framed[0] if record["type"] == 1 else KPROF.framed[1]).encoded_size(n)
        trace.append(KprofRecord(type=_int(record["type"]), cpu=_int(record["cpu"]),
                                 ts_ns=_int(record["ts_ns"]), pcs=tuple(pcs), size=size,
                                 pid=_int(record.get("pid", 0))))  # fmt: skip
    return tuple(trace), status, len(data) - used


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise InfraError(f"the kprof decoder returned {value!r} where a number belongs")
    return value


def kprof_run(agent: AgentLike, spec: AgentSpec, plan: KprofPlan) -> KprofRun:
    """Load ``spec`` (flavour kprof), run ``plan`` in one session, collect and decode.

    :raise InfraError: a control step failed, or the stream could not be read.
    """
    agent.load(spec)
    online = agent.online_cpus()
    session = session_steps(plan)
    steps, names = expand((IRQ_READ, *session, IRQ_READ, profctl.sleep_step(IDLE_MS), IRQ_READ,
                           Named(profctl.cat_step(f"{DEBUGFS}/nmi"), "core")))  # fmt: skip
    results = Results.of(steps, agent.run_steps(texts(steps), actions=plan.actions))
    readings = {name: parse_stats(results, name) for name in names}
    _require_session_ok(results, plan)
    data = agent.fetch(BACKGROUND, "kprof-background.bin") if plan.background_reader else b""
    data += agent.fetch(STREAM, "kprof-stream.bin")
    trace, status, undecoded = decode_stream(agent, data)
    irq = [r.lines for r in results.all(IRQ_READ.name)]
    return KprofRun(
        spec=spec, readings=readings, trace=trace, bytes_read=len(data),
        undecoded=undecoded, status_records=status, online_cpus=online,
        core=parse_percpu(results.one("core").lines),
        core_at_final=parse_percpu(results.one("core_at_final").lines),
        nmi_expected=agent.nmi_expected_for(spec), injected=plan.injected,
        kpdata=plan.kpdata, kpdata_idle=plan.kpdata_idle,
        flushes=_flushes_before_stop(plan.body), reader_during=plan.background_reader,
        eof=_eof_outcomes(agent, results, plan),
        control=_control_outcomes(results) if plan.control else {},
        kernel=interrupt_reads(irq, agent.pmu_irq_label),
        injections=injections_of(results.steps, online),
        truth=evidence_of(agent, results.steps, results.results, chains=KPROF.records_chains),
        nmi_graph=agent.nmi_graph(spec.flavour),
        tracing_ns=_tracing_span(results),
    )  # fmt: skip


def _tracing_span(results: Results) -> tuple[int, int] | None:
    """The clock reads just before ``start`` and just after ``stop`` (``tracing``)."""
    clocks = [r.int_value("ns") for r in results.all("tracing", at_least=0)]
    return (clocks[0], clocks[1]) if len(clocks) >= 2 else None


#: A body step taking a CPU offline: kprof's offline hook flushes that CPU's block.
_OFFLINE_STEP = re.compile(r"write:/sys/devices/system/cpu/cpu\d+/online:0")


def _flushes_before_stop(body: Sequence[str]) -> int:
    """`flush` commands, and CPUs taken offline (each flushes its block) while tracing."""
    return sum(1 for step in body if step == ctl_step("flush") or _OFFLINE_STEP.fullmatch(step))


def _require_session_ok(results: Results, plan: KprofPlan) -> None:
    """Raise on a failed step, except the reads and probes whose outcome is judged."""
    # kpctl commands of the body (a scenario's) may be refused: their effect is judged, and
    # the same command of the session's own may then be refused too (a body's ``stop``
    # leaves the session's ``stop`` nothing to stop).
    refusable = {step for step in plan.body if step.startswith(f"writefd:{CTL_FD}:")}
    for name, step, result in zip(results.names, results.steps, results.results, strict=True):
        judged = name in (DRAIN, PAST_EOF) or name.startswith(CONTROL) or step in refusable
        if not result.ok and not judged:
            raise AgentStepError(f"kprof step failed: {result.describe()}")


def _eof_outcomes(agent: AgentLike, results: Results, plan: KprofPlan) -> tuple[str, ...]:
    """Every read that met the end of the stream, in order: "0" or the errno."""
    outcomes: list[str] = []
    if plan.background_reader:
        status = agent.fetch(f"{BACKGROUND}.status", "kprof-background.status").decode()
        fields = dict(part.partition("=")[::2] for part in status.split())
        outcomes.append(fields.get("errno", "?"))
    for result in (results.one(DRAIN), *results.all(PAST_EOF)):
        if result.ok or result.errno != "EINTR":
            outcomes.append("0" if result.ok else str(result.errno))
        else:
            raise InfraError(f"kprof drain read hung: {result.describe()}")
    return tuple(outcomes)


def _control_outcomes(results: Results) -> dict[str, str]:
    """KP-O8 probe → "ok" or its errno (the probes run once each, in order)."""
    outcomes = {}
    for name, _ in CONTROL_PROBES:
        result = results.one(f"{CONTROL}{name}")
        outcomes[name] = "ok" if result.ok else str(result.errno)
    return outcomes
