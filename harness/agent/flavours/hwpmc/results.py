"""What one hwpmc run produced, as plain values for its oracles and report.

`harness.agent.flavours.hwpmc.run` fills these from the guest; the oracles and the
report only read them, so they can be tested on hand-written values::

    run = HwpmcRun(spec=spec, counters=counters, ...)
    check_hwpmc(run)                          # harness.agent.flavours.hwpmc.oracles
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from harness.agent.flavours.hwpmc.data import HWPMC_LOG_REC
from harness.agent.oracles.content import content_numbers
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.evidence import RunEvidence
from harness.agent.oracles.memo import by_identity
from harness.agent.oracles.walks import walks_of
from harness.agent.values.results import AgentCounters, flat_numbers
from harness.agent.values.samples import Sample

Table = Mapping[int, Mapping[str, int]]
Kind = Literal["standard", "exact", "independence", "control", "script", "counting"]


def cell(table: Table, cpu: int, name: str) -> int:
    """``name`` of ``cpu`` in a per-CPU table; 0 where the table has no such entry."""
    return table.get(cpu, {}).get(name, 0)


def total(table: Table, name: str) -> int:
    """``name`` summed over every CPU of a per-CPU table."""
    return sum(cell(table, cpu, name) for cpu in table)


#: A log record's pid when the sample had no process (idle); enum pa_chain_stop's
#: "depth reached".
PID_NONE = 0xFFFFFFFF
CHAIN_TRUNCATED = 1


#: Bit 0 of a hwpmc log record's flags: user mode (the seed's format; tprof's and dt's
#: bit 0 says kernel).
USER_FLAG = 1


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One decoded hwpmc/log record; ``chain``: its callers, 0 past depth."""

    seq: int
    ts_ns: int
    pc: int
    pmcid: int
    cpu: int
    pid: int
    tid: int
    flags: int  # USER_FLAG: the sampled PC is a user PC
    depth: int
    chain_stop: int = 0  # enum pa_chain_stop: 0 end, 1 depth reached, 2.. cut short
    pad: int = 0
    chain: tuple[int, ...] = ()

    @classmethod
    def decoded(cls, record: Mapping[str, int]) -> LogRecord:
        """A record from the generated decoder's values (``chain[0]`` … gathered)."""
        plain = {name: value for name, value in record.items() if "[" not in name}
        return cls(**plain, chain=HWPMC_LOG_REC.array(record, "chain"))

    @property
    def callers(self) -> tuple[int, ...]:
        """The return addresses after the PC, innermost first (depth - 1 of them)."""
        return self.chain[: max(0, self.depth - 1)]


@dataclass(frozen=True, slots=True)
class PmcLine:
    """One line of hwpmc/pmcs: a PMC as the module sees it."""

    id: int
    mode: str
    cpus: str
    state: str
    runcount: int
    stalled: Mapping[int, int]  # CPU → its stall flag


@dataclass(frozen=True, slots=True)
class OpOutcome:
    """One SP_IOC_PMC_OP a control run made, the errno it had to give and the one it gave."""

    label: str
    expected: str  # "ok" or an errno name
    got: str
    op: str = ""  # the SP_IOC_PMC_OP it made: "PMCRELEASE", ...


@dataclass(frozen=True, slots=True)
class Counting:
    """A system-counting PMC's run (HW-SC) on ``cpu``.

    The value SETCOUNT gave it, the guest's CLOCK_MONOTONIC (ns) before and after
    START and before and after STOP, and what RW read while it ran, right after STOP
    and after the idle phase.
    ``events_per_ns`` is the counted event's fixed rate, if it has one.
    """

    cpu: int
    initial: int
    clocks: tuple[int, int, int, int]
    running: int
    stopped: int
    later: int
    events_per_ns: float | None


@dataclass(frozen=True, slots=True)
class HwpmcRun(RunEvidence):
    """One hwpmc run: PMCs allocated, started, driven, stopped, released.

    ``stopped`` is the per-CPU table read after STOP and an idle phase of
    several sweep periods (quiescence), ``stopped_pmcs`` the PMCs then;
    ``counters`` the debugfs files after every RELEASE; ``stats_later`` the global
    statistics some sweep periods after that. ``checkpoints`` are per-CPU tables
    the plan read mid-run, by name. ``fill`` maps CPU → producer calls injected
    with sweeps suppressed (HW-O4), ``resume`` CPU → calls injected after the
    restarting sweep (HW-O5); ``pair`` is (A, B) of an independence run (HW-O8);
    ``counting`` the system-counting PMC's readings, if the run had one (HW-SC);
    ``log_faults`` the log writes the harness made fail (the ``hwpmc_log`` fault, HW-O3).
    """

    kind: Kind
    counters: AgentCounters
    online_cpus: tuple[int, ...]
    nmi_expected: bool
    stopped: Table = field(default_factory=dict)
    stopped_pmcs: tuple[PmcLine, ...] = ()
    final_pmcs: tuple[PmcLine, ...] = ()
    stats_later: Mapping[str, int] = field(default_factory=dict)
    checkpoints: Mapping[str, Table] = field(default_factory=dict)
    log: tuple[LogRecord, ...] = ()
    fill: Mapping[int, int] = field(default_factory=dict)
    resume: Mapping[int, int] = field(default_factory=dict)
    pair: tuple[int, int] | None = None
    ops: tuple[OpOutcome, ...] = ()
    #: syscalls and syscall_errors of GETDRIVERSTATS before and after the control ops.
    driver_before: Mapping[str, int] = field(default_factory=dict)
    driver_after: Mapping[str, int] = field(default_factory=dict)
    #: x_ss_running before and after START on an offlined CPU (HW-D6), if the run did it.
    ss_around_offline_start: tuple[int, int] | None = None
    #: RELEASE outcomes, errno names ("ok" when it returned 0).
    releases: tuple[str, ...] = ()
    throttling_disabled: bool = True
    counting: Counting | None = None
    log_faults: int = 0
    #: The guest's CLOCK_MONOTONIC (ns) read by the plan's ``clock`` steps, in order
    #: (before and after the STARTs, before and after the STOPs).
    clocks: tuple[int, ...] = ()

    @property
    def core(self) -> Mapping[int, Mapping[str, int]]:
        """CPU → the core's per-CPU counters, as the counters read them."""
        return self.counters.core

    @property
    def nsamples(self) -> int:
        """n: the ring capacity the module was loaded with."""
        return self.spec.param("nsamples")

    @property
    def log_capacity(self) -> int:
        """Records hwpmc/log holds: ``log_kib`` KiB of whole records (the module's own sum)."""
        return self.spec.param("log_kib") * 1024 // HWPMC_LOG_REC.size

    @property
    def hardware_stall(self) -> bool:
        """Whether stalls stopped the counter for real (the module's own report)."""
        return self.counters.info.get("stall") == "hardware"

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name (see `harness.agent.values.results.flat_numbers`)."""
        snap = self.counters
        flat = flat_numbers(snap.stats, snap.stats_percpu, snap.core, [r.cpu for r in self.log])
        return flat | content_numbers(self.content())

    @by_identity  # judged by check, judged and report: made once (`memo`)
    def content(self) -> ContentView:
        """The log's records as samples for the content oracles (chains of callchaindepth)."""
        samples = tuple(
            Sample(r.cpu, r.pc, 0 if r.pid == PID_NONE else r.pid, r.tid,
                   user=bool(r.flags & USER_FLAG), chain=r.callers,
                   truncated=r.chain_stop == CHAIN_TRUNCATED,
                   time_ns=r.ts_ns, length=r.depth, stop=r.chain_stop)
            for r in self.log
        )  # fmt: skip
        return view_of(samples, self.truth, chain_depth=self.spec.param("callchaindepth"),
                       walks=walks_of(self.counters.core))  # fmt: skip

    def records(self) -> Sequence[LogRecord]:
        """The log's records, in log order."""
        return self.log

    def record(self) -> dict[str, object]:
        """The run's spec, setup and counters, for ``agent-run-NN.json``."""
        snap = self.counters
        return {
            "spec": self.spec.describe(),
            "kind": self.kind,
            "online_cpus": self.online_cpus,
            "fill": {str(c): n for c, n in self.fill.items()},
            "resume": {str(c): n for c, n in self.resume.items()},
            "ops": [(o.label, o.expected, o.got) for o in self.ops],
            "releases": self.releases,
            "counting": None if self.counting is None else asdict(self.counting),
            "log_faults": self.log_faults,
            "log_records": len(self.log),
            "info": dict(snap.info),
            "stats": dict(snap.stats),
            "stats_later": dict(self.stats_later),
            "stats_percpu": {str(c): dict(v) for c, v in snap.stats_percpu.items()},
            "stopped": {str(c): dict(v) for c, v in self.stopped.items()},
            "checkpoints": {
                name: {str(c): dict(v) for c, v in table.items()}
                for name, table in self.checkpoints.items()
            },
            "nmi": {str(c): dict(v) for c, v in snap.core.items()},
            "state": dict(snap.state),
        }
