"""tprof's behaviour for the shared machinery (`harness.agent.flavour.Flavour`).

The standard run is the sampling workload: pinned busy loops on every other CPU,
the IRQ-off probe on the last one, an idle phase. Scenarios run a script between
START and the collect steps; tprof's own ops arm a one-shot fault at START's
workqueue creation or buffer allocation (``fault-wq``, ``fault-buf``) and STOP and
START twice (``restart``: a START that fails once, as an armed fault makes it, is an
outcome; the second must succeed). The extra run ``partial_read`` is TP-D9's shape
(`partial_read_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.agent import profctl
from harness.agent.flavour import (
    AgentLike,
    AgentRun,
    Flavour,
    OpRule,
    Script,
)
from harness.agent.flavours.tprof.bench import TPROF_BENCH
from harness.agent.flavours.tprof.data import TPROF, TPROF_DROP_CAUSES, TPROF_PARAM
from harness.agent.flavours.tprof.oracles import LAWS
from harness.agent.flavours.tprof.races import (
    burst_timeout_run,
    offline_stop_run,
    online_run,
    stop_kick_run,
)
from harness.agent.flavours.tprof.report import format_cpu_table
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.flavours.tprof.run import (
    RunContext,
    ioctl_step,
    nest_step,
    partial_read_run,
    scripted_run,
    tprof_beside_perf,
    tprof_run,
)
from harness.agent.judging import Judging, compose
from harness.agent.module.spec import AgentSpec
from harness.agent.overlap import OVERLAP_MS, OVERLAP_PERIOD, OVERLAP_RUN
from harness.agent.steps import SamplingPlan, fault_step, inject_step, kick_step
from harness.agent.truth.isolation import isolated, isolation_cpu
from harness.agent.truth.program import TruthLaunch, standard_launches
from harness.agent.values.stress import Provoke, RacePair, RareWriters, StepData, Stress

#: Calls nested in one task-context producer call in the exact run (TP-D5).
NESTED = 7


#: How long the standard run's ground-truth workloads run. tprof's records carry no
#: time, so WHERE judges a workload's samples over its whole life, where start-up and
#: exit may put up to 2 x (64 system calls + its page faults + calls) samples outside
#: leaf or hot and cold (`harness.agent.oracles.where.leaf_bound`): at 1000 ms, 2 vCPUs
#: on a loaded host, the chain workload's 201 samples left a bound of 0, and a PC
#: moved 256 bytes (user_pc_shift) passed; on 8 vCPUs, quiet, 114 left 0 as well.
TRUTH_MS = 3000


def _standard(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    plan = SamplingPlan(busy_cpus=cpus[::2], probe_cpus=(cpus[-1],), busy_ms=1000)
    truth = standard_launches(cpus, TRUTH_MS)
    return isolated(agent, isolation_cpu(cpus, cpus[-1]),
                    lambda: tprof_run(agent, spec, plan, truth))  # fmt: skip


def _peer(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """Busy loops on every CPU, the ground-truth workloads beside them, perf beside the agent."""
    truth = (TruthLaunch("chain", cpus[-1], 1000), TruthLaunch("mix", cpus[0], 1000))
    return tprof_beside_perf(agent, spec, SamplingPlan(busy_cpus=cpus, busy_ms=1000), truth)


def overlap_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """The overlap watch's own run (`harness.agent.overlap`): 5 s at a 250 us period, no busy loop.

    Every CPU samples; the spinners beside it read every CPU's fill index.
    """
    plan = SamplingPlan(busy_cpus=(), busy_ms=0, idle_ms=OVERLAP_MS)
    return tprof_run(agent, replace(spec, period=OVERLAP_PERIOD), plan)


#: The overlap watch's rare-writer run (`harness.agent.rarerounds.drive_rare_writers`): the
#: auto drain at its shortest interval (10 ms, not 1000), each swapping every CPU's buffer.
OFTEN_DRAINED = RareWriters("the auto drain every 10 ms",
                            {"period": OVERLAP_PERIOD, "drain": "auto", "drain_ms": 10},
                            ({"op": "idle", "ms": OVERLAP_MS},))  # fmt: skip


def _exact(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """TP-D1's shape on every CPU: S = 8, list limit 2, four rounds of {inject 12, kick}.

    First, on the first CPU, a task-context call holds a burst of 7 nested inside it
    (TP-D5's collision): the guard drops the 7 into x_nested_drop; without it they
    are recorded where the outer call then writes and publishes, and 7 vanish.
    """
    exact = replace(spec, pmu_produce=False, drain="manual").with_params(
        buffer_samples=8, list_limit=2
    )
    first = cpus[0]
    nest = (nest_step(first, NESTED), inject_step(first, 1, ctx="task"))
    body = (*nest, *(inject_step("all", 12), kick_step()) * 4)
    injected = dict.fromkeys(cpus, 48) | {first: 48 + NESTED + 1}
    context = RunContext(injected=injected, kicks=4)
    return scripted_run(agent, exact, body, context)[0]


def _script(agent: AgentLike, spec: AgentSpec, script: Script) -> AgentRun:
    context = RunContext(
        throttling_disabled=script.throttling_disabled,
        max_sample_rate=script.max_sample_rate,
        injected=script.injected or None,
        kicks=script.kicks if spec.drain == "manual" else None,
        actions=script.actions,
        instruction_clock=script.instruction_clock,
    )
    return scripted_run(agent, spec, script.body, context)[0]


def _fault(point: str) -> Callable[[int, int], str]:
    """An op arming ``point`` for the next START (the first hit fails)."""
    return lambda cpu, count: fault_step(point)


def _restart(cpu: int, count: int) -> tuple[str, ...]:
    """STOP and START, twice: only the second round's steps must succeed."""
    start = ioctl_step("TPROF_IOC_START", bytes(TPROF_PARAM.size))
    return (profctl.repeat_step(2, 2), ioctl_step("TPROF_IOC_STOP"), start)


def _two_buffers(count: int) -> tuple[StepData, ...]:
    """Two bursts of ``count`` on CPU 0, each moved to the read list by a kick."""
    burst: StepData = {"op": "inject", "cpu": 0, "count": count}
    kick: StepData = {"op": "kick", "cpu": 0}
    return (burst, kick) * 2


#: tprof's part of the shared stress plan: S = 8, a kick moves each buffer to the read list.
STRESS = Stress(
    agent={"drain": "manual", "buffer_samples": 8, "period": 200_000, "pmu_produce": False},
    capacity=8,
    full="x_overflow",
    causes=tuple(name for name, _ in TPROF_DROP_CAUSES),
    recorded="x_sample",
    flush=({"op": "kick"},),
    provoke=(
        Provoke(
            "x_dropbuf_sample",
            8,
            _two_buffers(8),
            agent={"list_limit": 1},
            why="two full buffers of 8, a read list of 1",
        ),
        Provoke(
            "x_overflow_dropbuf",
            4,
            _two_buffers(12),
            agent={"list_limit": 1},
            others={"x_dropbuf_sample": 8, "x_overflow": 4},
            why="TP-D1's shape: two bursts of 12 into S = 8, a read list of 1",
        ),
    ),
    reader=(),  # its consumer is the drain, every drain_ms while the producers run
    reader_agent={"drain": "auto", "drain_ms": 50},
    restart=({"op": "restart"},),
    unprovoked={
        "x_overflow_emptybuf": "S = 0 needs est_freq 0, which the scenario format refuses",
        "x_nobuf": "only after a failed buffer swap (fault-buf), whose outcome is not modelled",
        "x_not_running": "no op injects between STOP and START (restart starts again at once)",
        "x_nested_drop": "its nest hook has no scenario op: the exact run judges it",
        "x_quirk_lost": "counts only in quirk TP-D1's build",
        "x_stop_discard": "STOP swaps every current buffer onto the read list first: only a "
        "call racing that last swap lands here",
    },
)

#: How tprof is judged and shown: its laws, its table, its matrix columns.
JUDGING = Judging(
    kind=TprofRun,
    laws=LAWS,
    table=format_cpu_table,
    percpu=lambda run: run.counters.stats_percpu,
    recorded="x_sample",
    drops=tuple((name.removeprefix("x_"), name) for name, _ in TPROF_DROP_CAUSES),
)

FLAVOUR = Flavour(
    info=TPROF,
    judges=compose(JUDGING, TPROF),
    standard_run=_standard,
    exact_run=_exact,
    run_script=_script,
    peer_run=_peer,
    # TP-D9's scenarios; the windows of issue 10's races and set-up order, reintroduced as
    # mutants (issue 25)
    extra_runs={
        "partial_read": partial_read_run,
        "offline_stop": offline_stop_run,
        "stop_kick": stop_kick_run,
        "online": online_run,
        "burst_timeout": burst_timeout_run,
        OVERLAP_RUN: overlap_run,  # the overlap watch's (harness.agent.overlap)
    },
    budget_scenario=Path(__file__).with_name("tprof-budgets.toml"),  # C-3, TP-O10
    bench=TPROF_BENCH,
    ops={"fault-wq": OpRule(), "fault-buf": OpRule(), "restart": OpRule()},
    stress=STRESS,
    race_pairs=(
        RacePair("tprof's buffer fill", "percpu.{cpu}.x_sample", drive=OFTEN_DRAINED),
        RacePair("tprof's buffer swap", "percpu.{cpu}.x_swaps", in_nmi=False, drive=OFTEN_DRAINED),
    ),
    op_steps={
        "fault-wq": _fault("wq_create"),
        "fault-buf": _fault("buf_alloc"),
        "restart": _restart,
    },
)
