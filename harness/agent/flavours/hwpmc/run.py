"""Drive the hwpmc flavour in a guest: PMCs through SP_IOC_PMC_OP, sweeps, the log.

Everything of one run happens in one profctl process on one descriptor (the PMCs'
owner): allocate and start the plan's PMCs, run its body, STOP, read the kernel's
PMU interrupt counts, RELEASE, the counters, read ``hwpmc/log``::

    run = hwpmc_run(agent, AgentSpec(flavour="hwpmc"), standard_plan((0, 1)))
    check_hwpmc(run)                       # [] when every oracle holds

Steps are tagged as the plan builds them (a tag is the step's name, `Named`), so
results are asked for by tag, not by text or place.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.agent import profctl
from harness.agent.flavour import AgentLike
from harness.agent.flavours.hwpmc.data import (
    CPU_ANY,
    DRIVER_STATS,
    HWPMC,
    HWPMC_LOG_REC,
    PMC_MODES,
    PMC_OP,
    PMC_OP_IOCTL,
    PMC_OPS,
)
from harness.agent.flavours.hwpmc.results import (
    Counting,
    HwpmcRun,
    Kind,
    LogRecord,
    OpOutcome,
    PmcLine,
)
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import IDLE_MS, PROC_INTERRUPTS, injections_of, interrupt_reads
from harness.agent.steps import (
    DEBUGFS,
    DEVICE,
    FD,
    GUEST_DIR,
    Named,
    Results,
    counters_of,
    counters_steps,
    fault_step,
    parse_pairs,
    parse_percpu,
)
from harness.agent.truth.program import evidence_of
from harness.errors import AgentStepError, InfraError

IRQ_READ = profctl.cat_step(PROC_INTERRUPTS)
HWPMC_DIR = f"{DEBUGFS}/hwpmc"
LOG_FD = FD + 1  # the second descriptor profctl opens: hwpmc/log
LOG_COPY = f"{GUEST_DIR}/hwpmc-log.bin"
Tagged = tuple[str, str]  # (step, tag); tag "" for an untagged step that must succeed


def pmc_id(cpu: int, mode: str, row: int = 0) -> int:
    """The id ALLOCATE gives: row | mode << 8 | cpu << 12 (cpu 0xfffff: any)."""
    field_cpu = 0xFFFFF if cpu == CPU_ANY else cpu
    return row | PMC_MODES[mode] << 8 | field_cpu << 12


def pmc_op_bytes(op: str | int, **fields: int) -> bytes:
    """SP_IOC_PMC_OP's argument for ``op`` (a name or a raw code) with ``fields`` set."""
    values = {name: 0 for name in PMC_OP.names}
    values.update(abi=0x03000000, op=PMC_OPS[op] if isinstance(op, str) else op, cpu=CPU_ANY)
    values.update(fields)
    return struct.pack(PMC_OP.struct_format, *(values[name] for name in PMC_OP.names))


def pmc_step(op: str | int, **fields: int) -> str:
    """One SP_IOC_PMC_OP on the run's descriptor."""
    return profctl.ioctl_step(FD, PMC_OP_IOCTL.number, PMC_OP.size, pmc_op_bytes(op, **fields))


def decode_op(data: bytes) -> dict[str, int]:
    """An SP_IOC_PMC_OP buffer after the call, field → value."""
    return dict(zip(PMC_OP.names, struct.unpack(PMC_OP.struct_format, data), strict=True))


def sweep_step(cpu: int | str, on: bool) -> str:
    """Suppress (off) or resume (on) the timer sweeps of ``cpu`` (or ``"all"``)."""
    return profctl.write_step(f"{HWPMC_DIR}/sweep", f"cpu={cpu} on={int(on)}")


def resume_at_release_step() -> str:
    """Every CPU's timer sweeps resume when the next RELEASE begins (not before)."""
    return profctl.write_step(f"{HWPMC_DIR}/sweep", "cpu=all on=2")


def log_fault_step() -> str:
    """The next write to hwpmc/log fails as a full log's would (fault ``hwpmc_log``)."""
    return fault_step("hwpmc_log")


def pending_step(cpu: int) -> str:
    """The next entry recorded on ``cpu`` stays pending (HW-D3's hook)."""
    return profctl.write_step(f"{HWPMC_DIR}/pending", f"cpu={cpu}")


def ss_op_step(op: str, cpu: int) -> str:
    """START, STOP or RELEASE (``op``) of the SS PMC on ``cpu``."""
    return pmc_step(op, id=pmc_id(cpu, "SS"))


def pmcs_step() -> str:
    """Read hwpmc/pmcs (id, mode, CPUs, state, runcount, stall flags)."""
    return profctl.cat_step(f"{HWPMC_DIR}/pmcs")


def checkpoint(name: str) -> Tagged:
    """Read the per-CPU statistics mid-run, kept under ``name``."""
    return profctl.cat_step(f"{DEBUGFS}/stats_percpu"), f"ck:{name}"


#: The value a plan's SC PMC is given by SETCOUNT before START: far from 0, so a
#: SETCOUNT that is lost or a count that restarts at 0 shows.
SC_INITIAL = 1 << 40


@dataclass(frozen=True, slots=True)
class PmcSpec:
    """One PMC a plan allocates and starts: SS or SC on one CPU, or TS on a CPU set."""

    mode: str
    cpus: tuple[int, ...]

    @property
    def id(self) -> int:
        """Its id: row 0 samples, an SC PMC takes the first counting row (1)."""
        row = 1 if self.mode == "SC" else 0
        return pmc_id(self.cpus[0] if self.mode in ("SS", "SC") else CPU_ANY, self.mode, row)

    def allocate(self) -> str:
        """ALLOCATE it."""
        if self.mode in ("SS", "SC"):
            return pmc_step("PMCALLOCATE", mode=PMC_MODES[self.mode], cpu=self.cpus[0])
        base = min(self.cpus)
        mask = sum(1 << (cpu - base) for cpu in self.cpus)
        return pmc_step(
            "PMCALLOCATE", mode=PMC_MODES[self.mode], cpuset_base=base, cpuset_mask=mask
        )


@dataclass(frozen=True, slots=True)
class HwpmcPlan:
    """What one hwpmc run does and what that means for the oracles.

    ``pre`` runs before the PMCs start, ``body`` while they run; ``release_early``
    releases right after STOP (entries still in the rings: the release bound) rather
    than after the idle phase; ``log_faults`` is how many log writes the steps make fail
    (`log_fault_step`). The rest tells the oracles what the steps did.
    """

    kind: Kind
    pmcs: tuple[PmcSpec, ...]
    body: tuple[Tagged, ...] = ()
    pre: tuple[Tagged, ...] = ()
    after_stop: tuple[Tagged, ...] = ()
    release_early: bool = False
    fill: Mapping[int, int] = field(default_factory=dict)
    resume: Mapping[int, int] = field(default_factory=dict)
    pair: tuple[int, int] | None = None
    #: PMCs the body releases itself: not stopped or released again at the end.
    released: frozenset[int] = frozenset()
    log_faults: int = 0


def _untagged(steps: Sequence[str]) -> tuple[Tagged, ...]:
    return tuple((step, "") for step in steps)


def plan_steps(plan: HwpmcPlan, spec: AgentSpec) -> tuple[Tagged, ...]:
    """The whole run as tagged profctl steps."""
    sweep_ms = max(1, spec.param("sweep_us") // 1000)
    counting = [p for p in plan.pmcs if p.mode == "SC"]
    clock = (profctl.clock_step(), "clock")
    starts = (clock, *((pmc_step("PMCSTART", id=p.id), "") for p in plan.pmcs), clock)
    live = [p for p in plan.pmcs if p.id not in plan.released]
    stops = (clock, *((pmc_step("PMCSTOP", id=p.id), "") for p in live), clock)
    setcounts = tuple((pmc_step("PMCSETCOUNT", id=p.id, value=SC_INITIAL), "") for p in counting)

    def reads(tag: str) -> tuple[Tagged, ...]:
        return tuple((pmc_step("PMCRW", id=p.id, flags=1), tag) for p in counting)

    releases = tuple((pmc_step("PMCRELEASE", id=p.id), "release") for p in live)
    pmcs = profctl.cat_step(f"{HWPMC_DIR}/pmcs")
    stopped = ((profctl.cat_step(f"{DEBUGFS}/stats_percpu"), "stopped"), (pmcs, "stopped_pmcs"))
    early, late = (releases, ()) if plan.release_early else ((), releases)
    # The sweeps settle for IDLE_MS before the stopped stats are read. RELEASED's window
    # ends IDLE_MS after the last release: STOP only stops a PMC, RELEASE gives its event
    # back (`leave_event_armed` re-arms it there).
    idle_end = ((profctl.sleep_step(IDLE_MS), ""), (IRQ_READ, "irq"))
    settled, released = (idle_end[:1], idle_end) if late else (idle_end, ())
    # HW-O7's quiet after RELEASE: every sampled CPU spins 5 sweep periods before the
    # stats are read again. An idle vCPU's cycles raise almost no overflow under TCG (a
    # mutant whose events outlived RELEASE kept intr_ignored at 0 across a 20 ms sleep),
    # a spinning one raises one a period.
    sampled = sorted({cpu for p in plan.pmcs if p.mode != "SC" for cpu in p.cpus})
    quiet = (
        *((profctl.spin_step(cpu, 5 * sweep_ms), "") for cpu in sampled),
        (profctl.wait_step(), ""),
    )
    return (
        (IRQ_READ, "irq"),
        (profctl.open_step(DEVICE), ""),
        (pmc_step("GETMODULEVERSION", value=0x03000000), ""),
        *plan.pre,
        *((p.allocate(), "") for p in plan.pmcs),
        *setcounts,
        *starts,
        *plan.body,
        *reads("sc_running"),
        (profctl.wait_step(), ""),
        *stops,
        (IRQ_READ, "irq"),
        *reads("sc_stopped"),
        *plan.after_stop,
        *early,
        *settled,
        *stopped,
        *reads("sc_later"),
        *late,
        *released,
        *((read.step, read.name) for read in counters_steps()),
        (pmcs, "final_pmcs"),
        *quiet,
        (profctl.cat_step(f"{DEBUGFS}/stats"), "later"),
        *_untagged(
            [
                profctl.open_step(f"{HWPMC_DIR}/log"),
                profctl.read_step(LOG_FD, LOG_COPY, 65536),
                profctl.close_step(LOG_FD),
                profctl.close_step(FD),
            ]
        ),
    )


def parse_pmcs(lines: Sequence[str]) -> tuple[PmcLine, ...]:
    """hwpmc/pmcs lines → `PmcLine` values.

    :raise InfraError: a line lacks a field.
    """
    found = []
    for line in lines:
        pairs = dict(part.partition("=")[::2] for part in line.split())
        try:
            stalled = {
                int(c): int(f)
                for c, _, f in (item.partition(":") for item in pairs["stalled"].split(",") if item)
            }
            found.append(
                PmcLine(
                    int(pairs["id"], 0),
                    pairs["mode"],
                    pairs["cpus"],
                    pairs["state"],
                    int(pairs["runcount"]),
                    stalled,
                )
            )
        except (KeyError, ValueError) as exc:
            raise InfraError(f"malformed hwpmc/pmcs line: {line!r}") from exc
    return tuple(found)


def hwpmc_run(agent: AgentLike, spec: AgentSpec, plan: HwpmcPlan) -> HwpmcRun:
    """Load ``spec``, run ``plan`` in one profctl process, collect and decode.

    Steps tagged ``release`` or ``resume``, and scenario ops, may fail (their errno is kept); any
    other failed step is the harness's problem.

    :raise InfraError: a step that must succeed failed.
    """
    agent.load(spec)
    online = agent.online_cpus()
    tagged = tuple(Named(step, tag) for step, tag in plan_steps(plan, spec))
    results = Results.of(tagged, agent.run_steps(tuple(t.step for t in tagged)))
    _require_ok(results)
    stats_later = {k: int(v) for k, v in parse_pairs(results.one("later").lines).items()}
    # The counters as read after every RELEASE, and the stats file again 5 sweep periods
    # later: HW-O7 holds intr_ignored equal across them. Until the steps were named the
    # counters took the last read of each file, the later one, so HW-O7 compared that
    # read with itself and could not fail.
    counters = counters_of(results)
    data = agent.fetch(LOG_COPY, f"hwpmc-log-{agent.run_count:02d}.bin")
    run = HwpmcRun(
        spec=spec,
        kind=plan.kind,
        online_cpus=online,
        nmi_expected=agent.nmi_expected_for(spec),
        counters=counters,
        stopped=parse_percpu(results.one("stopped").lines),
        stopped_pmcs=parse_pmcs(results.one("stopped_pmcs").lines),
        final_pmcs=parse_pmcs(results.one("final_pmcs").lines),
        stats_later=stats_later,
        checkpoints={name.removeprefix("ck:"): parse_percpu(results.one(name).lines)
                     for name in dict.fromkeys(results.names) if name.startswith("ck:")},
        log=tuple(LogRecord.decoded(r) for r in agent.decode(HWPMC_LOG_REC.c_name, data)),
        fill=plan.fill,
        resume=plan.resume,
        pair=plan.pair,
        releases=tuple(r.errno or "ok" for r in results.all("release", at_least=0)),
        ops=op_outcomes(results),
        driver_before=_driver_stats(results, "driver_before"),
        driver_after=_driver_stats(results, "driver_after"),
        ss_around_offline_start=_ss_running(results),
        kernel=interrupt_reads([r.lines for r in results.all("irq")], agent.pmu_irq_label),
        injections=injections_of(results.steps, online),
        counting=_counting(plan, results, agent.events_per_ns(spec)),
        clocks=tuple(r.int_value("ns") for r in results.all("clock", at_least=0)),
        log_faults=plan.log_faults,
        truth=evidence_of(agent, results.steps, results.results, chains=HWPMC.records_chains),
        nmi_graph=agent.nmi_graph(spec.flavour),
    )  # fmt: skip
    agent.save_run(run.record())
    return run


def _require_ok(results: Results) -> None:
    """Raise on a failed step its tag does not allow to fail."""
    for tag, result in results.named():
        may_fail = tag in ("release", "resume") or tag.startswith("op:")
        if not result.ok and not may_fail:
            raise AgentStepError(f"hwpmc step failed: {result.describe()}")


def _counting(plan: HwpmcPlan, results: Results, events_per_ns: float | None) -> Counting | None:
    """The plan's SC PMC (at most one) as read: clocks and RW values."""
    sc = [p for p in plan.pmcs if p.mode == "SC"]
    if not sc:
        return None
    if len(sc) > 1:
        raise InfraError("a hwpmc plan has at most one SC PMC")
    clocks = tuple(r.int_value("ns") for r in results.all("clock"))
    if len(clocks) != 4:
        raise InfraError(f"expected 4 clock reads around START and STOP, got {len(clocks)}")

    def value(tag: str) -> int:
        return decode_op(results.one(tag).out_bytes)["value"]

    return Counting(
        cpu=sc[0].cpus[0],
        initial=SC_INITIAL,
        clocks=(clocks[0], clocks[1], clocks[2], clocks[3]),
        running=value("sc_running"),
        stopped=value("sc_stopped"),
        later=value("sc_later"),
        events_per_ns=events_per_ns,
    )


def _ss_running(results: Results) -> tuple[int, int] | None:
    if not results.all("ss_before", at_least=0):
        return None
    before, after = (parse_pairs(results.one(t).lines) for t in ("ss_before", "ss_after"))
    return int(before["x_ss_running"]), int(after["x_ss_running"])


def _driver_stats(results: Results, tag: str) -> dict[str, int]:
    """The outputs of the GETDRIVERSTATS tagged ``tag``, by the seed's names ({}: none)."""
    if not results.all(tag, at_least=0):
        return {}
    out = decode_op(results.one(tag).out_bytes)
    return {name: out[f"out{i}"] for i, name in enumerate(DRIVER_STATS)}


def op_outcomes(results: Results) -> tuple[OpOutcome, ...]:
    """The control ops (tags ``op:<label>:<expected>:<op>``) with the errno each gave."""
    outcomes = []
    for tag, result in results.named():
        if tag.startswith("op:"):
            _, label, expected, op = tag.split(":", 3)
            outcomes.append(OpOutcome(label, expected, result.errno or "ok", op))
    return tuple(outcomes)
