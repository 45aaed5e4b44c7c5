"""Agent steps: the profctl sequences a run sends, and the parsers for what comes back.

Pure: strings in, strings or values out; `harness.agent.driver` runs them in a
guest. A step is one profctl command (see `harness.agent.profctl`); ``FD`` is
the descriptor the first ``open`` gets, the agent's device::

    steps = workload_steps(SamplingPlan(busy_cpus=(0, 2)))  # spins, probes, wait, idle
    body = (inject_step("all", 100), kick_step(), *host_action_steps("pause"))
    results = agent.steps(steps)          # harness.agent.driver runs them in the guest
    require_ok(results)                   # AgentStepError naming the first failed step
    counters_of(steps, results).stats     # {'sample': 16, ...} from the debugfs files
    busy_of(steps, results)               # {0: (pid,), 2: (pid,)}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def busy_of(
    steps: Sequence[str], results: Sequence[profctl.StepResult]
) -> dict[int, tuple[int, ...]]:
    """CPU → PIDs of the busy loops the ``spin`` steps started there."""
    busy: dict[int, tuple[int, ...]] = {}
    for step, result in zip(steps, results, strict=True):
        if step.startswith("spin:"):
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


def counters_of(steps: Sequence[str], results: Sequence[profctl.StepResult]) -> AgentCounters:
    """The counters from the last ``cat`` of each debugfs file among ``steps``.

    :raise InfraError: a file was not read.
    """
    files: dict[str, tuple[str, ...]] = {}
    for step, result in zip(steps, results, strict=True):
        if result.op == "cat" and result.ok and step.startswith(f"cat:{DEBUGFS}/"):
            files[step.rsplit("/", 1)[-1]] = result.lines
    missing = [name for name in SNAPSHOT_FILES if name not in files]
    if missing:
        raise InfraError(f"the run did not read the agent's {', '.join(missing)}")
    return parse_counters(files)


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
