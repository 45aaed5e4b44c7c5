"""Run tprof in a guest: its control steps, the standard run and scripted runs.

Pure step builders plus runners over `harness.agent.runner.AgentLike`::

    run = tprof_run(agent, AgentSpec(), SamplingPlan(busy_cpus=(0, 2)))
    run, results = scripted_run(agent, spec, (inject_step("all", 12), kick_step()),
                                context=RunContext(injected={0: 12, 1: 12}, kicks=1))
    run = partial_read_run(agent, AgentSpec(quirks=TPROF.quirk_bit("TP-D9")), (0,))
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from harness.agent import profctl
from harness.agent.flavour import AgentLike
from harness.agent.flavours.tprof.data import TPROF, TPROF_PARAM, TPROF_STAT
from harness.agent.flavours.tprof.oracles import check_tprof
from harness.agent.flavours.tprof.results import TprofRecord, TprofRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content import check_content
from harness.agent.oracles.evidence import (
    IDLE_MS,
    PROC_INTERRUPTS,
    injections_of,
    interrupt_reads,
    is_injection,
)
from harness.agent.peer.counts import PeerWindow, info_window
from harness.agent.peer.run import PeerHooks, run_beside_perf
from harness.agent.steps import (
    DEBUGFS,
    DEVICE,
    FD,
    GUEST_DIR,
    READ_CHUNK,
    SAMPLES,
    Named,
    Results,
    SamplingPlan,
    busy_of,
    counters_of,
    counters_steps,
    inject_step,
    kick_step,
    require_ok,
    texts,
    workload_steps,
)
from harness.agent.truth.program import (
    TruthLaunch,
    evidence_of,
    launch_steps,
    output_steps,
)
from harness.agent.values.results import Violation
from harness.agent.values.samples import Sample

#: The kernel's PMU interrupt counts (`harness.agent.oracles.evidence`), read three times.
IRQ_READ = Named(profctl.cat_step(PROC_INTERRUPTS), "irq")
#: Where a background reader (`partial_read_run`) writes what it read.
BACKGROUND = f"{GUEST_DIR}/tprof-background.bin"
#: TP-D9's shape: S and the list limit of `partial_read_run`.
PARTIAL_READ_S, PARTIAL_READ_LIMIT = 8, 2


@dataclass(frozen=True, slots=True)
class RunContext:
    """How a run is set up, and what its steps do, for the oracles."""

    throttling_disabled: bool = True
    max_sample_rate: int | None = None
    probe_cpus: tuple[int, ...] = ()
    injected: Mapping[int, int] | None = None
    kicks: int | None = None
    #: Another PMU user (the perf peer) samples beside the agent during the run.
    pmu_shared: bool = False
    #: Marker name → what the host does there (see `Agent.steps_with_host_actions`).
    actions: Mapping[str, Callable[[], None]] = field(default_factory=dict)
    #: A reader started in the body read part of the stream into `BACKGROUND`.
    background_reader: bool = False
    #: The guest's clocks count instructions (`harness.agent.flavour.Script`).
    instruction_clock: bool = False
    #: ``inject``'s wait for its bursts, in ms (None: the budget's; `Agent.load`).
    burst_wait_ms: int | None = None
    #: ``inject`` steps may end in ETIMEDOUT: the module took such a step's burst back
    #: whole, produced nowhere (its contract, one CPU per step), so the run's
    #: injections are those of the steps that succeeded; ``injected`` is then theirs.
    injections_may_time_out: bool = False


def ioctl_step(name: str, data: bytes = b"") -> str:
    """A native tprof ioctl on the agent's descriptor."""
    ioctl = TPROF.ioctl(name)
    return profctl.ioctl_step(FD, ioctl.number, ioctl.arg_size, data)


#: The names a plan's START and GETSTAT carry (`start_steps`, `collect_steps`).
START, GETSTAT = "start", "getstat"


def start_steps() -> tuple[str | Named, ...]:
    """Open the device and START, named `START` (the seed ignores START's argument)."""
    start = ioctl_step("TPROF_IOC_START", bytes(TPROF_PARAM.size))
    return (profctl.open_step(DEVICE), Named(start, START))


def collect_steps() -> tuple[str | Named, ...]:
    """STOP, read the stream to EOF, read every debugfs file (`counters_steps`), GETSTAT, close.

    GETSTAT is named `GETSTAT`.
    """
    return (
        ioctl_step("TPROF_IOC_STOP"),
        profctl.timeout_step(60),
        profctl.read_step(FD, SAMPLES, READ_CHUNK),
        *counters_steps(),
        Named(ioctl_step("TPROF_IOC_GETSTAT"), GETSTAT),
        profctl.close_step(FD),
    )


def judged_steps(body: Sequence[str], after_stop: Sequence[str] = ()) -> tuple[str | Named, ...]:
    """START, ``body``, STOP, ``after_stop`` and collect, bracketed by the kernel's evidence.

    The kernel's PMU interrupt counts are read before START, right after STOP and
    `IDLE_MS` later (`harness.agent.oracles.evidence`).
    """
    stop, *collect = collect_steps()
    return (IRQ_READ, *start_steps(), *body, stop, IRQ_READ, profctl.sleep_step(IDLE_MS), IRQ_READ,
            *after_stop, *collect)  # fmt: skip


def nest_step(cpu: int, count: int) -> str:
    """The next task-context producer call on ``cpu`` holds a burst of ``count`` inside it.

    The call reads its index, then waits until the burst's calls ran nested in it,
    then publishes (TP-D5's collision, on cue). `harness.agent.oracles.evidence` counts the
    burst as injected on ``cpu``; inject the task-context call after this step.
    """
    return profctl.write_step(f"{DEBUGFS}/nest", f"cpu={cpu} count={count}")


def read_kick_step() -> str:
    """The next read(2) kicks every online CPU between taking its buffer and putting it back."""
    return profctl.write_step(f"{DEBUGFS}/read_kick", "1")


def read_kick_wait_step(ms: int) -> str:
    """Block until the read armed by `read_kick_step` kicked every CPU; ETIMEDOUT after ``ms``."""
    return profctl.write_step(f"{DEBUGFS}/read_kick", f"wait ms={ms}")


def tprof_steps(
    plan: SamplingPlan, launches: Sequence[TruthLaunch] = ()
) -> tuple[str | Named, ...]:
    """The whole standard run as one profctl sequence (with the ground-truth ``launches``)."""
    body = (*launch_steps(launches), *workload_steps(plan), *output_steps(launches))
    return judged_steps(body)


def decode_stat(data: bytes) -> dict[str, int]:
    """TPROF_IOC_GETSTAT's 48 bytes → the six seed counters."""
    return dict(zip(TPROF_STAT.names, struct.unpack(TPROF_STAT.struct_format, data), strict=True))


def tprof_run(
    agent: AgentLike, spec: AgentSpec, plan: SamplingPlan, launches: Sequence[TruthLaunch] = ()
) -> TprofRun:
    """Load ``spec``, run the standard workload (and ``launches``), collect everything.

    :raise ModuleLoadError: the module did not load.
    :raise InfraError: a control step failed or the guest tool misbehaved.
    """
    context = RunContext(
        throttling_disabled=plan.throttling_disabled,
        max_sample_rate=plan.max_sample_rate,
        probe_cpus=plan.probe_cpus,
    )
    return run_steps(agent, spec, tprof_steps(plan, launches), context)[0]


def tprof_beside_perf(
    agent: AgentLike, spec: AgentSpec, plan: SamplingPlan, launches: Sequence[TruthLaunch] = ()
) -> TprofRun:
    """``plan`` (and ``launches``) with Linux perf beside the agent: PEER, PROFILE.

    With the ground-truth workloads launched, user PCs fold to their functions on
    both sides (`harness.agent.peer.run`), so PROFILE sees a wrong user PC too.

    :raise GuestError: perf did not start, stop or read back.
    """

    def run(a: AgentLike, s: AgentSpec, _: object) -> TprofRun:
        return tprof_run(a, s, plan, launches)

    def sized(a: AgentLike, s: AgentSpec, _: object, ms: int) -> TprofRun:
        lasting = tuple(replace(w, ms=ms) for w in launches)
        return tprof_run(a, s, replace(plan, busy_ms=ms), lasting)

    hooks = replace(PEER_HOOKS, sized=sized, usual_ms=plan.busy_ms, check=_peer_check)
    return run_beside_perf(agent, spec, plan.busy_cpus, run, hooks)


def _peer_check(run: TprofRun) -> list[Violation]:
    """A peer round's violations (tprof's flavour checks the same): one makes it the run."""
    return check_tprof(run) + check_content(run.content())


def profile_samples(run: TprofRun) -> tuple[Sample, ...]:
    """Tprof's records as samples, as the content oracles see them (no call chain)."""
    return run.content().samples


def _window(run: TprofRun, period: int) -> PeerWindow:
    """A tprof run's window, from the ``info`` and per-CPU ``nmi`` numbers it kept."""
    return info_window(run.counters.info, period, run.counters.core)


PEER_HOOKS = PeerHooks(samples=profile_samples, window=_window)


def partial_read_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun:
    """TP-D9: a read takes the head buffer of a full list and a kick lands before it is back.

    S = 8, list limit 2, bursts only, manual drain: two rounds of {inject 12 on
    every CPU, kick} fill the list, a third inject fills every current buffer, then
    a background reader (one record per read) takes the head buffer, the
    ``read_kick`` hook kicks every CPU, and the reader puts the buffer back. The
    seed (quirk TP-D9) unlinked the head, so one kicked buffer joins the list
    (``x_nbuf_on_list_max`` = 3); fixed, the head stays on the list and every kicked
    buffer is dropped (2). The reader reads to EOF after STOP; both reads are the stream.

    The reader is another task, so STOP waits (``read_kick`` ``wait``) until its
    kicks are done: TP-O2's ``x_swaps = ncpu × (3 + 2)`` counts them as the run's
    third kick, and a kick that STOP overtakes is refused (not running), one swap
    short per CPU it missed (36 to 39 of 40 seen on 8 vCPUs: the last CPUs in
    kick order), and that CPU's full buffer is then swapped at STOP instead. The
    wait is bounded by a quarter of the scaled command budget, as the module's
    burst wait.

    :raise InfraError: a step failed, or the read's kicks did not end in that bound.
    """
    run_spec = replace(spec, drain="manual", pmu_produce=False).with_params(
        buffer_samples=PARTIAL_READ_S, list_limit=PARTIAL_READ_LIMIT
    )
    body = (
        *(inject_step("all", 12), kick_step()) * 2,
        inject_step("all", 12),
        read_kick_step(),
        profctl.timeout_step(60),  # the reader's own limit: it ends at EOF after STOP
        profctl.readbg_step(FD, BACKGROUND, TPROF.record.size),
        read_kick_wait_step(int(agent.timeouts.command_s * 250)),
    )
    context = RunContext(injected=dict.fromkeys(cpus, 36), kicks=3, background_reader=True)
    steps = judged_steps(body, after_stop=(profctl.wait_step(),))
    return run_steps(agent, run_spec, steps, context)[0]


def scripted_run(
    agent: AgentLike, spec: AgentSpec, body: Sequence[str], context: RunContext | None = None
) -> tuple[TprofRun, Results]:
    """Load ``spec``, START, run ``body``, then collect as `tprof_run` does.

    ``context`` says what ``body`` does (injected counts, kicks), for the oracles.
    Every step must succeed; use the agent's ``steps`` for runs that expect errors.

    :raise InfraError: a step failed.
    """
    return run_steps(agent, spec, judged_steps(body), context or RunContext())


def run_steps(
    agent: AgentLike, spec: AgentSpec, steps: Sequence[str | Named], context: RunContext
) -> tuple[TprofRun, Results]:
    """Load ``spec``, run ``steps`` (every one must succeed), collect and save."""
    agent.load(spec, throttling_disabled=context.throttling_disabled,
               max_sample_rate=context.max_sample_rate,
               burst_wait_ms=context.burst_wait_ms)  # fmt: skip
    online = agent.online_cpus()
    started = time.monotonic()
    results = Results.of(steps, agent.run_steps(texts(steps), actions=context.actions))
    runtime_s = time.monotonic() - started
    # An inject step taken back whole (ETIMEDOUT, where the context allows it) made nothing.
    made = [(step, result) for step, result in results.pairs()
            if not (context.injections_may_time_out and is_injection(step)
                    and result.errno == "ETIMEDOUT")]  # fmt: skip
    require_ok([result for _, result in made])
    injections = injections_of([step for step, _ in made], online)
    reads = [r.lines for r in results.all(IRQ_READ.name)]
    data = agent.fetch(SAMPLES, f"samples-{agent.run_count:02d}.bin")
    if context.background_reader:  # it read the stream's start; the collect read the rest
        data = agent.fetch(BACKGROUND, f"background-{agent.run_count:02d}.bin") + data
    run = TprofRun(
        spec=spec,
        counters=counters_of(results),
        samples=tuple(TprofRecord(**r) for r in agent.decode(TPROF.record.c_name, data)),
        bytes_read=len(data),
        online_cpus=online,
        busy=busy_of(results),
        probe_cpus=context.probe_cpus,
        nmi_expected=agent.nmi_expected_for(spec),
        throttling_disabled=context.throttling_disabled,
        injected=injections.nmi if context.injections_may_time_out else context.injected,
        kicks=context.kicks,
        runtime_s=runtime_s,
        ref_events_per_ns=agent.events_per_ns(spec),
        kernel=interrupt_reads(reads, agent.pmu_irq_label, pmu_shared=context.pmu_shared),
        injections=injections,
        instruction_clock=context.instruction_clock,
        truth=evidence_of(agent, results.steps, results.results, chains=TPROF.records_chains),
        nmi_graph=agent.nmi_graph(spec.flavour),
        spin_loop=agent.spin_loop(),
    )
    agent.save_run(run.record())
    return run, results
