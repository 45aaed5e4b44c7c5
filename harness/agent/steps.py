"""Agent steps: the profctl sequences a run sends, and the parsers for what comes back.

Pure: strings in, strings or values out; `harness.agent.driver` runs them in a
guest. A step is one profctl command (see `harness.agent.profctl`); ``FD`` is
the descriptor the first ``open`` gets, the agent's device. A plan names the steps
whose results it wants (`Named`, `named`), and asks `Results` for them by name::

    plan = (*named("irq", cat_step(PROC_INTERRUPTS)), *workload_steps(SamplingPlan((0, 2))),
            inject_step("all", 100), kick_step(), *counters_steps())
    results = Results.of(plan, agent.run_steps(texts(plan)))
    require_ok(results.results)           # AgentStepError naming the first failed step
    results.one("irq").lines              # InfraError when no step, or two, has that name
    counters_of(results).stats            # {'sample': 16, ...} from the debugfs files
    busy_of(results)                      # {0: (pid,), 2: (pid,)}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from harness.agent import flavours, profctl
from harness.agent.values.results import CORE_NAMES, AgentCounters
from harness.errors import AgentStepError, InfraError

GUEST_DIR = "/tmp/profagent"
DEBUGFS = "/sys/kernel/debug/profagent"
DEVICE = "/dev/profagent"
FD = 3  # the first descriptor profctl opens (see harness.agent.profctl)
SAMPLES = f"{GUEST_DIR}/samples.bin"
READ_CHUNK = 65536
#: Where a hardware PMU lists its events (arm64: armv8_pmuv3_0, x86: cpu).
PMU_EVENT_DIRS = (
    "/sys/bus/event_source/devices/armv8_pmuv3*/events /sys/bus/event_source/devices/cpu/events"
)
SNAPSHOT_FILES = ("info", "stats", "stats_percpu", "nmi", "state")
#: The names `counters_steps` gives its reads: this, then the file's.
COUNTERS = "counters."
#: With throttling off, the perf core's sample rate, near the sysctl's INT_MAX (its
#: ceil(rate / HZ) must not overflow an int). perf_cpu_time_max_percent=0 turns only
#: the handler-time throttle off: the core still throttles an event past ceil(rate / HZ)
#: overflows within one of its CPU's scheduler ticks (kernel/events/core.c,
#: __perf_event_account_interrupt), and under TCG a 4-vCPU guest's NMIs can keep a busy
#: CPU's tick out for 1000 overflows of 100 µs periods (seen on 6.12). 1000000 (4000 a
#: tick at HZ=250) throttled kprof's standard run; this leaves 8000000 a tick.
MAX_SAMPLE_RATE = 2_000_000_000


@dataclass(frozen=True, slots=True)
class SamplingPlan:
    """The standard sampling workload: pinned busy loops, the probe, an idle phase."""

    busy_cpus: tuple[int, ...]
    busy_ms: int = 1500
    probe_cpus: tuple[int, ...] = ()
    probe_ms: int = 200
    idle_ms: int = 300
    throttling_disabled: bool = True
    #: With throttling on: the perf core's sample-rate limit (None: its default).
    max_sample_rate: int | None = None


@dataclass(frozen=True, slots=True)
class Named:
    """A step under the name a run asks for its result by (`Results`)."""

    step: str
    name: str


def named(name: str, *steps: str) -> tuple[Named, ...]:
    """``steps`` under ``name``: `Results.all` gives their results in this order."""
    return tuple(Named(step, name) for step in steps)


def texts(plan: Sequence[str | Named]) -> tuple[str, ...]:
    """The steps profctl runs for ``plan`` (a bare string is a step without a name)."""
    return tuple(step.step if isinstance(step, Named) else step for step in plan)


@dataclass(frozen=True, slots=True)
class Results:
    """What a plan's steps reported, asked for by the names the plan gave them.

    ``steps`` and ``names`` run beside ``results`` (a step without a name has "").
    """

    steps: tuple[str, ...]
    names: tuple[str, ...]
    results: tuple[profctl.StepResult, ...]

    @classmethod
    def of(cls, plan: Sequence[str | Named], results: Sequence[profctl.StepResult]) -> Results:
        """``results`` of ``plan``'s steps, in order.

        :raise InfraError: there are not as many results as steps.
        """
        if len(plan) != len(results):
            raise InfraError(f"{len(results)} profctl results for {len(plan)} steps")
        names = tuple(step.name if isinstance(step, Named) else "" for step in plan)
        return cls(texts(plan), names, tuple(results))

    def all(self, name: str, *, at_least: int = 1) -> tuple[profctl.StepResult, ...]:
        """The results of the steps named ``name``, in order.

        :raise InfraError: fewer than ``at_least`` steps carry that name.
        """
        found = tuple(r for n, r in zip(self.names, self.results, strict=True) if n == name)
        if len(found) < at_least:
            raise InfraError(f"the profctl sequence has {len(found)} step(s) named {name!r}, "
                             f"not {at_least} or more")  # fmt: skip
        return found

    def one(self, name: str) -> profctl.StepResult:
        """The result of the one step named ``name``.

        :raise InfraError: no step or more than one carries that name.
        """
        found = self.all(name, at_least=0)
        if len(found) != 1:
            raise InfraError(f"the profctl sequence has {len(found)} steps named {name!r}, not 1")
        return found[0]

    def named(self) -> Iterator[tuple[str, profctl.StepResult]]:
        """(name, result) of every step, in order: for names that carry data (``op:...``)."""
        return zip(self.names, self.results, strict=True)

    def pairs(self) -> Iterator[tuple[str, profctl.StepResult]]:
        """(step, result) of every step, in order: for readers of what the steps did."""
        return zip(self.steps, self.results, strict=True)


def fault_step(point: str, nth: int = 1) -> str:
    """Arm the core's fault point ``point``: its ``nth`` next hit fails."""
    return profctl.write_step(f"{DEBUGFS}/fault", f"point={point} nth={nth}")


def inject_step(cpu: int | str, count: int, ctx: str = "nmi") -> str:
    """Inject ``count`` producer calls on ``cpu`` (or ``"all"``), synchronously."""
    return profctl.write_step(f"{DEBUGFS}/inject", f"cpu={cpu} count={count} ctx={ctx}")


def kick_step(cpu: int | str = "all") -> str:
    """One manual drain on ``cpu`` (or every online CPU)."""
    return profctl.write_step(f"{DEBUGFS}/kick", str(cpu))


def probe_step(cpu: int, ms: int) -> str:
    """Spin ``ms`` with IRQs masked on ``cpu``, counting overflows that land inside."""
    return profctl.write_step(f"{DEBUGFS}/probe", f"cpu={cpu} ms={ms}")


def workload_steps(plan: SamplingPlan) -> tuple[str, ...]:
    """The standard workload: busy loops, IRQ-off probes, wait for them, an idle phase."""
    return (
        *(profctl.spin_step(cpu, plan.busy_ms) for cpu in plan.busy_cpus),
        *(probe_step(cpu, plan.probe_ms) for cpu in plan.probe_cpus),
        profctl.wait_step(),
        profctl.sleep_step(plan.idle_ms),
    )


def marker_paths(name: str) -> tuple[str, str]:
    """The files a sequence held at ``name`` creates (marker) and waits for (go)."""
    return f"{GUEST_DIR}/at-{name}", f"{GUEST_DIR}/go-{name}"


def host_action_steps(name: str) -> tuple[str, ...]:
    """Steps that hold the sequence at ``name`` until the host has acted."""
    marker, go = marker_paths(name)
    return (profctl.mark_step(marker), profctl.await_step(go))


def busy_of(results: Results) -> dict[int, tuple[int, ...]]:
    """CPU → PIDs of the busy loops the ``spin`` steps started there."""
    busy: dict[int, tuple[int, ...]] = {}
    for result in results.results:
        if result.op == "spin":
            cpu = result.int_value("cpu")
            busy[cpu] = (*busy.get(cpu, ()), result.int_value("pid"))
    return busy


def parse_pairs(lines: Sequence[str]) -> dict[str, str]:
    """``name value`` lines → dict."""
    pairs = {}
    for line in lines:
        name, _, value = line.partition(" ")
        pairs[name] = value.strip()
    return pairs


def parse_percpu(lines: Sequence[str]) -> dict[int, dict[str, int]]:
    """``cpu name value`` lines → {cpu: {name: value}}.

    :raise InfraError: a line is not three fields with integer CPU and value.
    """
    table: dict[int, dict[str, int]] = {}
    for line in lines:
        fields = line.split()
        if len(fields) != 3 or not fields[0].isdigit() or not fields[2].isdigit():
            raise InfraError(f"malformed per-CPU line from the agent: {line!r}")
        table.setdefault(int(fields[0]), {})[fields[1]] = int(fields[2])
    return table


def parse_counters(files: dict[str, tuple[str, ...]]) -> AgentCounters:
    """The debugfs files (name → lines) → `AgentCounters`.

    Every counter the flavour (named in ``info``) and the core declare must be
    there, for every CPU: a missing one would otherwise read as 0 and pass any
    "must be zero" check.

    :raise InfraError: a malformed line, or a counter missing (named, with its file).
    """
    info = parse_pairs(files["info"])
    flavour = flavours.get(info.get("flavour", "?"))
    counters = AgentCounters(
        info=info,
        stats={k: int(v) for k, v in parse_pairs(files["stats"]).items()},
        stats_percpu=parse_percpu(files["stats_percpu"]),
        core=parse_percpu(files["nmi"]),
        state=parse_pairs(files["state"]),
    )
    require_names("stats", [(None, counters.stats)], flavour.stat_names)
    require_names("stats_percpu", sorted(counters.stats_percpu.items()), flavour.percpu_names)
    require_names("nmi", sorted(counters.core.items()), CORE_NAMES)
    return counters


def require_names(
    file: str, tables: Sequence[tuple[int | None, Mapping[str, int]]], names: Sequence[str]
) -> None:
    """Raise unless every (CPU, table) pair (CPU None: a global file) holds every name.

    :raise InfraError: naming the first missing counter, its CPU and the file.
    """
    if not tables:
        raise InfraError(f"the agent's {file} file lists no CPU at all")
    for cpu, table in tables:
        missing = [name for name in names if name not in table]
        if missing:
            where = "" if cpu is None else f" for CPU {cpu}"
            raise InfraError(
                f"the agent's {file} file has no {', '.join(missing)}{where}: "
                "a stale or mismatched build?"
            )


def counters_steps() -> tuple[Named, ...]:
    """Read every debugfs file, each named for `counters_of`."""
    return tuple(Named(profctl.cat_step(f"{DEBUGFS}/{name}"), f"{COUNTERS}{name}")
                 for name in SNAPSHOT_FILES)  # fmt: skip


def counters_of(results: Results) -> AgentCounters:
    """The counters from the last read of each debugfs file that succeeded (`counters_steps`).

    :raise InfraError: a file was not read.
    """
    files = {name: [r.lines for r in results.all(f"{COUNTERS}{name}", at_least=0) if r.ok]
             for name in SNAPSHOT_FILES}  # fmt: skip
    missing = [name for name, reads in files.items() if not reads]
    if missing:
        raise InfraError(f"the run did not read the agent's {', '.join(missing)}")
    return parse_counters({name: reads[-1] for name, reads in files.items()})


def require_ok(results: Sequence[profctl.StepResult]) -> None:
    """Raise on the first failed step.

    :raise AgentStepError: naming the step and its errno (the guest refused it).
    """
    for result in results:
        if not result.ok:
            raise AgentStepError(f"agent step failed: {result.describe()}")


def throttling_command(*, disabled: bool, max_sample_rate: int | None = None) -> str:
    """A guest command that switches the perf core's interrupt throttling off or back on.

    On, the perf core allows ``max_sample_rate`` overflows per second and CPU (its
    default, 100000, when None) and lowers that limit by itself when handlers are
    slow. Off, the CPU-time limit is 0 and the rate `MAX_SAMPLE_RATE`: the per-tick cap
    (rate / HZ) holds even then. The limit can only be written while the CPU-time
    limit is neither 0 nor 100, hence the order, and nothing is written when both
    already hold: while the limit is being written, any PMU user's slow handler
    (under TCG: tens of µs, against the 1 ns such a rate leaves) makes the kernel lower
    the rate, to 1 per tick.
    """
    rate = MAX_SAMPLE_RATE if disabled else (max_sample_rate or 100_000)
    percent = 0 if disabled else 25
    sysctl = "/proc/sys/kernel/perf"
    return (f'[ "$(cat {sysctl}_cpu_time_max_percent)" = {percent} ] && '
            f'[ "$(cat {sysctl}_event_max_sample_rate)" = {rate} ] || '
            f"{{ echo 25 > {sysctl}_cpu_time_max_percent && "
            f"echo {rate} > {sysctl}_event_max_sample_rate && "
            f"echo {percent} > {sysctl}_cpu_time_max_percent; }}")  # fmt: skip
