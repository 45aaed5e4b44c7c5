"""hwpmc's behaviour for the shared machinery (`harness.agent.flavour.Flavour`).

The standard run is one SS PMC per online CPU under pinned busy loops, swept by
the timer; the exact run suppresses the sweeps, fills every ring with injected
bursts, restarts by a kick and releases with entries in the rings. Scenarios run
their steps while SS PMCs run on the CPUs their ``pmc`` ops name (every online CPU if
none) and one TS PMC on the CPUs their ``process`` ops name. hwpmc's own ops, each
taking one ``cpu``: ``pmc``, ``process``, ``suppress`` / ``resume`` (the timer sweeps
of that CPU), ``pmc-start`` / ``pmc-stop`` / ``pmc-release`` (its SS PMC) and
``pending`` (its next entry stays pending: HW-D3's hook).
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
from harness.agent.flavours.hwpmc.bench import HWPMC_BENCH
from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.hwpmc.oracles import LAWS
from harness.agent.flavours.hwpmc.plans import (
    BUSY_MS,
    control_plan,
    counting_plan,
    exact_plan,
    exact_spec,
    independence_plan,
    pair_spec,
    standard_plan,
)
from harness.agent.flavours.hwpmc.report import format_hwpmc_table
from harness.agent.flavours.hwpmc.results import HwpmcRun
from harness.agent.flavours.hwpmc.run import (
    HwpmcPlan,
    PmcSpec,
    hwpmc_run,
    pending_step,
    pmc_id,
    pmcs_step,
    ss_op_step,
    sweep_step,
)
from harness.agent.judging import Judging, compose, content_samples
from harness.agent.module.spec import AgentSpec
from harness.agent.overlap import OVERLAP_MS, OVERLAP_PERIOD, OVERLAP_RUN
from harness.agent.peer.counts import PeerWindow, bracket_window
from harness.agent.peer.pairing import pair_window
from harness.agent.peer.run import PeerHooks, beside_perf
from harness.agent.peer.sizing import MIN_MS
from harness.agent.steps import probe_step
from harness.agent.truth.isolation import isolated, isolation_cpu
from harness.agent.truth.program import launch_steps, output_steps, standard_launches
from harness.agent.values.stress import RacePair, RareWriters, Stress
from harness.errors import ConfigError, InfraError

#: The standard run's ground-truth workloads and IRQ-off probe (content oracles).
TRUTH_MS = 1000
PROBE_MS = 200


def _standard(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """`standard_plan` with the ground-truth workloads and the IRQ-off probe beside it.

    The probe spins on the last CPU (kernel ground truth for CHAIN); the workloads'
    output is read after STOP.
    """
    return _standard_for(agent, spec, cpus, BUSY_MS)


def _standard_for(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...], ms: int) -> HwpmcRun:
    """`_standard` with busy loops of ``ms``; the workloads end as much earlier, ≥ `MIN_MS`."""
    plan = standard_plan(cpus, ms)
    launches = standard_launches(cpus, max(MIN_MS, ms - (BUSY_MS - TRUTH_MS)))
    body = (*((s, "") for s in launch_steps(launches)), *plan.body,
            (probe_step(cpus[-1], PROBE_MS), ""))  # fmt: skip
    after = (*plan.after_stop, *((s, "") for s in output_steps(launches)))
    run = replace(plan, body=body, after_stop=after)
    return isolated(agent, isolation_cpu(cpus, cpus[-1]), lambda: hwpmc_run(agent, spec, run))


def peer_spec(spec: AgentSpec) -> AgentSpec:
    """The standard run's spec with rings that no peer run can fill.

    A full ring stalls its CPU's counter until a sweep restarts it (the seed's rule),
    and a stalled counter counts nothing while perf's goes on: PEER would then find
    the agent short by the stall and PROFILE without the stalled CPU's samples
    (seen: 1419 against perf's 1540 on the probe's CPU, 32 entries). The sweep runs
    in hard IRQ, so the longest stretch without one is the IRQ-off probe plus one
    sweep period, and the counter overflows at most once per period in it (one more
    at each end). The ring holds twice that, whatever the host's load: load makes
    overflows later and folds them, never more.
    """
    window_ns = PROBE_MS * 1_000_000 + spec.param("sweep_us") * 1_000
    need = 2 * (-(-window_ns // spec.period) + 2)
    return spec.with_params(nsamples=max(spec.param("nsamples"), min(need, 65535)))


def _peer(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    return _standard(agent, peer_spec(spec), cpus)


def _peer_for(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...], ms: int) -> HwpmcRun:
    """`_peer` with busy loops of ``ms`` (a peer round: `harness.agent.peer.sizing`)."""
    return _standard_for(agent, peer_spec(spec), cpus, ms)


def overlap_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """The overlap watch's own run (`harness.agent.overlap`): 5 s at a 250 us period, no busy loop.

    One SS PMC per CPU; every CPU's timer sweeps its ring into the log while the
    spinners beside it read every CPU's ring indices, stall flags and counters (the
    state and per-CPU stats files). Rings sized as the peer run's (`peer_spec`): a
    stall is no race to look for. Judged by hwpmc's oracles as any run.
    """
    fast = peer_spec(replace(spec, period=OVERLAP_PERIOD))
    plan = replace(standard_plan(cpus), body=((profctl.sleep_step(OVERLAP_MS), ""),))
    return hwpmc_run(agent, fast, plan)


#: The overlap watch's rare-writer run (`harness.agent.rarerounds.drive_rare_writers`): one SS
#: PMC a CPU at the overlap run's period, the timer sweeping every 1 ms (not 4).
OFTEN_SWEPT = RareWriters("the sweep every 1 ms", {"period": OVERLAP_PERIOD, "sweep_us": 1000},
                          ({"op": "idle", "ms": OVERLAP_MS},))  # fmt: skip


def _exact(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    exact = exact_spec(spec)
    return hwpmc_run(agent, exact, exact_plan(cpus, exact.param("nsamples")))


def _counting(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    return hwpmc_run(agent, spec, counting_plan(cpus[-1]))


def _independence(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    if len(cpus) < 2:
        raise ConfigError("hwpmc's independence run needs two CPUs")
    return hwpmc_run(agent, pair_spec(spec), independence_plan(cpus[0], cpus[1]))


def _control(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    return hwpmc_run(agent, spec, control_plan(cpus))


def _script(agent: AgentLike, spec: AgentSpec, script: Script) -> AgentRun:
    named = {op: tuple(sorted(script.op_counts.get(op, {}))) for op in ("pmc", "process")}
    ss = named["pmc"] or (() if named["process"] else agent.online_cpus())
    pmcs = [PmcSpec("SS", (cpu,)) for cpu in ss]
    if named["process"]:
        pmcs.append(PmcSpec("TS", named["process"]))
    released = frozenset(pmc_id(cpu, "SS") for cpu in script.op_counts.get("pmc-release", {}))
    plan = HwpmcPlan(kind="script", pmcs=tuple(pmcs), released=released,
                  body=tuple((step, "") for step in script.body))  # fmt: skip
    return replace(hwpmc_run(agent, spec, plan), instruction_clock=script.instruction_clock)


def _ignore_count(step: Callable[[int], str]) -> Callable[[int, int], str]:
    """A one-CPU op as the scenario runner calls it (its count is always 0)."""
    return lambda cpu, count: step(cpu)


#: hwpmc's scenario ops: each takes one CPU and becomes one step.
OP_STEPS: dict[str, Callable[[int], str]] = {
    "pmc": lambda cpu: pmcs_step(),  # the PMC is set up before the body; show the table
    "process": lambda cpu: pmcs_step(),
    "suppress": lambda cpu: sweep_step(cpu, False),
    "resume": lambda cpu: sweep_step(cpu, True),
    "pmc-start": lambda cpu: ss_op_step("PMCSTART", cpu),
    "pmc-stop": lambda cpu: ss_op_step("PMCSTOP", cpu),
    "pmc-release": lambda cpu: ss_op_step("PMCRELEASE", cpu),
    "pending": pending_step,
}


def _window(run: HwpmcRun, period: int) -> PeerWindow:
    """Hwpmc arms each CPU at its PMC's START: the plan's clock reads bracket them all.

    The agent's ``info`` times only the first START's arming, and after STOP the
    counters are off until RELEASE disarms them, so its window would be wrong.

    :raise InfraError: the run did not read the clock around the STARTs and STOPs.
    """
    if len(run.clocks) < 4:
        raise InfraError(f"hwpmc peer run: {len(run.clocks)} clock reads, 4 needed")
    return bracket_window((run.clocks[0], run.clocks[1]), (run.clocks[-2], run.clocks[-1]), period)


#: hwpmc's part of the shared stress plan: rings of 4 entries, their sweeps held back.
STRESS = Stress(
    agent={"nsamples": 4, "period": 200_000, "pmu_produce": False},
    capacity=4,
    full="x_bufferfull",
    causes=HWPMC.sample_drops,
    recorded="x_recorded",
    setup=({"op": "suppress", "cpu": "each"},),
    flush=({"op": "kick", "cpu": "each"},),  # a sweep of each ring into the log, before STOP
    reader=(),  # its consumer is the timer's sweep into the log, every tick
    restart=({"op": "pmc-stop", "cpu": "each"}, {"op": "pmc-start", "cpu": "each"}),
    unprovoked={
        "x_ignored": "every CPU runs a sampling PMC in the plan's runs",
        "x_log_failed": "needs the hwpmc_log fault point, which no scenario op arms",
        "x_discarded_stopped": "a burst rides an overflow, and a stopped PMC raises none",
        "x_discarded_owner_kernel": "the bench attaches no owner to a PMC",
        "x_stalled_nmi": "0 with the hardware stall the bench uses",
    },
)

#: How hwpmc is judged and shown: its laws, its table, its matrix columns.
JUDGING = Judging(
    kind=HwpmcRun,
    laws=LAWS,
    table=format_hwpmc_table,
    percpu=lambda run: run.counters.stats_percpu,
    recorded="x_recorded",
    drops=(("bufferfull", "x_bufferfull"), ("stalled_nmi", "x_stalled_nmi")),
)
JUDGES = compose(JUDGING, HWPMC)

FLAVOUR = Flavour(
    info=HWPMC,
    judges=JUDGES,
    standard_run=_standard,
    exact_run=_exact,
    run_script=_script,
    # Paired profiles (`harness.agent.peer.profile`): a stalled or stopped PMC samples
    # nothing while perf's counter runs on, and where the CPU is then is no random
    # draw (the 6.1 debug kernel, 8 vCPUs: arch_local_irq_enable 9.2 % of hwpmc's
    # samples against 17.4 % of perf's, chi2 774.6 against 45.3; paired, 0.0).
    peer_run=beside_perf(
        _peer,
        HwpmcRun,
        PeerHooks(
            samples=content_samples,  # the flame graph draws the chains
            window=_window,
            pair_within_ns=pair_window(HWPMC),
            sized=_peer_for,
            usual_ms=BUSY_MS,
            check=JUDGES.check,
        ),
    ),
    ops={name: OpRule(cpu="one") for name in OP_STEPS},
    op_steps={name: _ignore_count(step) for name, step in OP_STEPS.items()},
    extra_runs={
        "counting": _counting,
        "independence": _independence,
        "control": _control,
        OVERLAP_RUN: overlap_run,  # the overlap watch's (harness.agent.overlap)
    },
    bench=HWPMC_BENCH,
    budget_scenario=Path(__file__).with_name("hwpmc-budgets.toml"),  # C-3
    stress=STRESS,
    race_pairs=(
        RacePair("hwpmc's ring write index", "percpu.{cpu}.x_recorded", drive=OFTEN_SWEPT),
        RacePair(
            "hwpmc's sweep of the ring", "percpu.{cpu}.x_swept", in_nmi=False, drive=OFTEN_SWEPT
        ),
    ),
)
