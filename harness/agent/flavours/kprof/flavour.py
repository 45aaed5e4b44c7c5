"""kprof's behaviour for the shared machinery (`harness.agent.flavour.Flavour`).

The standard run is busy loops on every CPU under the PMU with a reader draining
kpdata the whole time (the seed's continuous reader, KP-D1's shape). The exact
run injects task-context producer calls (uniform kernel records) with a small
qlimit, so the block arithmetic (KP-O2), the queue acceptance (KP-O3) and the
visibility (KP-O6) are exact, writes to kpdata (KP-O10) and probes kpctl
(KP-O8) and the discard at close (KP-O9). Scenario ops of kprof's own: ``reader``
(a background reader), ``kpctl-start``, ``kpctl-stop``, ``kpctl-flush``,
``kpctl-qlimit`` / ``kpctl-cpubufsz`` (``count`` in KiB), ``kpdata`` (writes
kernel PC ``KPDATA_BASE + 8 × count``), ``inject-task`` (producer calls in task
context: kernel PCs only, uniform records; an NMI burst lands wherever the CPU
was, user code included); ``kick`` is kprof's ``flush`` on one CPU.
"""

from __future__ import annotations

import math
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
from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.bench import KPROF_BENCH
from harness.agent.flavours.kprof.data import KPROF, MAX_DEPTH, record_size, records_per_block
from harness.agent.flavours.kprof.oracles import LAWS
from harness.agent.flavours.kprof.report import format_kprof_table
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.flavours.kprof.run import (
    KPDATA,
    KprofPlan,
    ctl_step,
    kprof_run,
    reading,
)
from harness.agent.judging import Judging, compose, content_samples
from harness.agent.module.spec import AgentSpec
from harness.agent.overlap import OVERLAP_MS, OVERLAP_PERIOD, OVERLAP_RUN
from harness.agent.peer.run import PeerHooks, beside_perf
from harness.agent.peer.sizing import MIN_MS
from harness.agent.steps import GUEST_DIR, fault_step, inject_step, probe_step
from harness.agent.truth.isolation import isolated, isolation_cpu
from harness.agent.truth.program import launch_steps, output_steps, standard_launches
from harness.agent.values.stress import RacePair, RareWriters, Stress
from harness.errors import ConfigError, InfraError

#: Kernel PCs the exact run writes to kpdata: while tracing, and before ``start``.
KPDATA_PC = 0xFFFF_FFFF_8100_0000
KPDATA_IDLE_PC = 0xFFFF_FFFF_8100_0040
#: The ``kpdata`` scenario op writes this + 8 × count.
KPDATA_BASE = 0xFFFF_FFFF_8200_0000
#: kpdata's count: any PC from KPDATA_BASE to 8 MiB above it is a kernel one (at least
#: TASK_SIZE_MAX), all the port asks of a written PC.
MAX_KPDATA = 1 << 20
#: The exact run's qlimit: two 65 490-byte blocks of depth-1 records fit (ceil).
EXACT_QLIMIT = 100_000
MAX_KIB = 1 << 20
MAX_TASK = 1_000_000
BUSY_MS = 1500
#: The standard run's trace depth at least: leaf, middle, outer, work, main and beyond.
CHAIN_DEPTH = 8
TRUTH_SLACK_MS = 700
PROBE_MS = 200
#: On one vCPU the probe waits this long past the workloads' phase: half the slack, so a
#: workload started late by up to that still ended before the probe spins.
PROBE_AFTER_MS = TRUTH_SLACK_MS // 2


def _standard(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """Busy loops on every CPU, the ground-truth workloads beside them (traces of depth ≥ 8).

    The IRQ-off probe spins `PROBE_MS` on the first CPU: its samples (pseudo-NMI on) have
    a kernel call path CHAIN knows. Never in the zero workload's phase on its CPU (the
    last): kprof's kernel traces carry no pid, so WHERE's kernel half there counts every
    kernel sample on that CPU in the phase, and the probe's 200 ms would be among them
    (8 vCPUs, a busy host: 30 of 294 in the zeroing loop, the bound 40). On one vCPU it
    spins after the workloads' phase, `PROBE_AFTER_MS` into the slack.

    The workloads end `TRUTH_SLACK_MS` before the sleep does, so their output is
    complete when it is read (no ``wait``: the background reader ends only at stop).
    """
    return _standard_for(agent, spec, cpus, BUSY_MS)


def _standard_for(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...], ms: int) -> KprofRun:
    """`_standard` with busy loops of ``ms`` (a peer round: `harness.agent.peer.sizing`).

    The workloads last ``ms`` less `TRUTH_SLACK_MS`, at least `MIN_MS` (the sleep then
    outlasts them by the slack).
    """
    depth = max(spec.param("trace_depth"), CHAIN_DEPTH)
    plan = KprofPlan(body=standard_body(cpus, ms), background_reader=True)
    deep = spec.with_params(trace_depth=depth)
    return isolated(agent, isolation_cpu(cpus, cpus[-1]), lambda: kprof_run(agent, deep, plan))


def standard_body(cpus: tuple[int, ...], ms: int) -> tuple[str, ...]:
    """The standard run's steps between START and STOP (`_standard_for`'s, busy ``ms``)."""
    truth_ms = max(MIN_MS, ms - TRUTH_SLACK_MS)
    launches = standard_launches(cpus, truth_ms)
    sleep_ms = max(ms, truth_ms + TRUTH_SLACK_MS) + 200 - PROBE_MS
    before_probe_ms = truth_ms + PROBE_AFTER_MS if len(cpus) == 1 else 0  # after the phase
    wait = (profctl.sleep_step(before_probe_ms),) if before_probe_ms else ()
    return (*launch_steps(launches), *(profctl.spin_step(cpu, ms) for cpu in cpus), *wait,
            probe_step(cpus[0], PROBE_MS), profctl.sleep_step(sleep_ms - before_probe_ms),
            *output_steps(launches))  # fmt: skip


def overlap_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    """The overlap watch's own run (`harness.agent.overlap`): 5 s at a 250 us period, no busy loop.

    Every CPU samples into its block queue while the background reader drains it and
    the spinners beside it read every CPU's queue, counters and state. Judged by
    kprof's oracles as any run.
    """
    fast = replace(spec, period=OVERLAP_PERIOD)
    plan = KprofPlan(body=(profctl.sleep_step(OVERLAP_MS),), background_reader=True)
    return kprof_run(agent, fast, plan)


#: The overlap watch's rare-writer run (`harness.agent.rarerounds.drive_rare_writers`): the
#: smallest blocks (16 KiB) of the largest records (16 PCs, padded: 108 a block, not
#: 545), so a block is handed off every 108 samples; a reader drains the queue. Its rounds
#: run under `harness.agent.rarerounds.NMI_ROUNDS` (its writers all run in NMI). Sampling
#: at 500 us for 10 s, measured on 2 vCPUs (kcsan 6.1, one guest): 176 hand-offs and
#: 1.04 expected meetings in a round of 13.7 s, where the model expects 3 rounds; at
#: 250 us 214 and 0.95 (14.4 s), at 1, 2 and 4 ms 0.88, 0.69 and 0.44 (the spinners read
#: more, the producers hand off less). The earlier drive (250 us for 5 s, the watch's
#: knobs) made 0.17 to 0.19 a round of 9 s: 15 rounds (127 s) in the sanitizer test, now
#: 3 (38 s: 551 hand-offs, 3.08 expected meetings). Beside another guest the spinners
#: read a fifth as often and the model expects about 31 rounds (`RARE_BUDGET_S`); beside
#: dt's sanitizer test a longer period did not help: 0.13 and 0.14 a round of 17 to 19 s
#: at 500 us, 0.08 at 1 ms, 0.03 at 2 ms (its spinners read 500, 425, 252 times a second).
#: Depth 1 (545 records a block) made 0.06; injected task-context calls beside the PMU's
#: failed KP-O4 (timestamps out of order) and met no more a second.
SMALL_BLOCKS_PERIOD, SMALL_BLOCKS_MS = 500_000, 10_000
SMALL_BLOCKS = RareWriters(
    "16 KiB blocks of 16-PC records, a sample every 500 us, a reader draining",
    {"period": SMALL_BLOCKS_PERIOD, "cpubufsz": 16 * 1024, "trace_depth": MAX_DEPTH,
     "trace_pad": 1},
    ({"op": "reader", "on": True}, {"op": "idle", "ms": SMALL_BLOCKS_MS}),
)  # fmt: skip


def exact_plan(spec: AgentSpec, cpus: tuple[int, ...]) -> KprofPlan:
    """The exact plan: R records on the first CPU, then one more, then 2R + 6 more.

    After R nothing is visible, after R + 1 one block is queued; every other CPU
    gets 2R + 3, the last CPU also a kpdata write.
    """
    per_block = records_per_block(spec.param("cpubufsz"), spec.param("trace_depth"))
    first, last = cpus[0], cpus[-1]
    body = (
        inject_step(first, per_block, ctx="task"), reading(res.VISIBLE_BEFORE),
        inject_step(first, 1, ctx="task"), reading(res.VISIBLE_AFTER),
        inject_step(first, 2 * per_block + 6, ctx="task"),
        *(inject_step(cpu, 2 * per_block + 3, ctx="task") for cpu in cpus[1:]),
    )  # fmt: skip
    injected = {cpu: 2 * per_block + 3 for cpu in cpus[1:]}
    injected[first] = 3 * per_block + 7
    return KprofPlan(body=body, injected=injected, kpdata={last: (KPDATA_PC,)},
                     kpdata_idle=(KPDATA_IDLE_PC,), control=True)  # fmt: skip


def _exact(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    exact = replace(spec, pmu_produce=False).with_params(qlimit=EXACT_QLIMIT, status=0)
    if exact.param("trace_depth") > 1:
        exact = exact.with_params(trace_pad=1)  # uniform records
    return kprof_run(agent, exact, exact_plan(exact, cpus))


#: The offline run: records on the outgoing CPU (well under a block), on each other CPU.
OFFLINE_OWN = 7
OFFLINE_OTHERS = 5


def online_path(cpu: int) -> str:
    """The sysfs switch that takes ``cpu`` offline (0) and back (1)."""
    return f"/sys/devices/system/cpu/cpu{cpu}/online"


def offline_plan(outgoing: int, others: tuple[int, ...]) -> KprofPlan:
    """A CPU goes offline with a partial block, and stays so up to stop.

    ``outgoing`` records `OFFLINE_OWN`, goes offline; each of ``others`` then records
    `OFFLINE_OTHERS`. The outgoing CPU's partial block reaches the queue only through
    the offline hook, and must be read whole (KP-O4).
    """
    body = (
        inject_step(outgoing, OFFLINE_OWN, ctx="task"),
        profctl.write_step(online_path(outgoing), "0"),
        *(inject_step(cpu, OFFLINE_OTHERS, ctx="task") for cpu in others),
    )
    injected = {cpu: OFFLINE_OTHERS for cpu in others} | {outgoing: OFFLINE_OWN}
    return KprofPlan(body=body, injected=injected)


def offline_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> KprofRun:
    """The offline plan with the last of ``cpus`` going out (task-context records only).

    The CPU is brought back online whatever happens.

    :raise ConfigError: fewer than two CPUs (CPU 0 cannot go offline).
    """
    if len(cpus) < 2:
        raise ConfigError("kprof's offline run needs two CPUs (CPU 0 cannot go offline)")
    outgoing = cpus[-1]
    exact = replace(spec, pmu_produce=False, period=200_000)
    try:
        return kprof_run(agent, exact, offline_plan(outgoing, cpus[:-1]))
    finally:
        agent.run_steps((profctl.write_step(online_path(outgoing), "1"),))


def _script(agent: AgentLike, spec: AgentSpec, script: Script) -> AgentRun:
    reader = script.switches.get("reader", False)
    # A background reader ends only at stop: `wait` before it would wait for it.
    body = tuple(s for s in script.body if not (reader and s == profctl.wait_step()))
    injected = dict(script.injected)
    for cpu, count in script.op_counts.get("inject-task", {}).items():
        injected[cpu] = injected.get(cpu, 0) + count
    plan = KprofPlan(body=body, injected=injected or None, background_reader=reader,
                     reopen="kpctl-reopen" in script.op_counts, actions=script.actions)  # fmt: skip
    return replace(kprof_run(agent, spec, plan), instruction_clock=script.instruction_clock)


def _kpdata_step(cpu: int, count: int) -> str:
    return profctl.write_step(KPDATA, f"{KPDATA_BASE + 8 * count:#x}")


def _recording(run: KprofRun) -> tuple[int, int]:
    """Kprof records only while its CPUs trace: from ``start`` to ``stop``.

    Its counters run from load to unload, and the calls outside tracing (a third of
    them on 8 vCPUs, in the reads after ``stop``) record nothing: perf's samples
    there would thin kprof's profile against perf's, not at random (chi2 291.7).

    :raise InfraError: the run read no clock around ``start`` and ``stop``.
    """
    if run.tracing_ns is None:
        raise InfraError("kprof peer run: no clock reads around start and stop")
    return run.tracing_ns


#: The stress plan's kprof: blocks of 16 KiB, a queue limit that one block meets.
STRESS_BLOCK, STRESS_QLIMIT = 16 * 1024, 4096
STRESS_R = records_per_block(STRESS_BLOCK, 1)
#: kprof's part of the shared stress plan: one queue for the machine, dropping whole blocks.
STRESS = Stress(
    agent={"cpubufsz": STRESS_BLOCK, "qlimit": STRESS_QLIMIT, "status": 0, "period": 200_000,
           "pmu_produce": False},
    capacity=math.ceil(STRESS_QLIMIT / (STRESS_R * record_size(1))) * STRESS_R,
    granule=STRESS_R,
    global_buffer=True,
    spill=1,
    inject_op="inject-task",
    full="x_records_in_dropped_blocks",
    causes=KPROF.sample_drops,
    reader=({"op": "reader", "on": True},),
    restart=({"op": "kpctl-stop"}, {"op": "kpctl-start"}),
    unprovoked={
        "x_records_not_tracing": "between kpctl-stop and kpctl-start: the restart case's",
        "x_records_nospare": "only while the irq_work lags a handed-off block: not on cue",
        "x_records_nested_drop": "no hook holds a producer call open for a burst to nest in",
    },
)  # fmt: skip

#: How kprof is judged and shown: its laws, its table, its matrix columns (final counters).
JUDGING = Judging(
    kind=KprofRun,
    laws=LAWS,
    table=format_kprof_table,
    percpu=lambda run: run.last.percpu,
    recorded="x_records_committed",
    drops=tuple((name.removeprefix("x_"), name) for name in (
        "x_records_nospare", "x_records_nested_drop", "x_records_not_tracing",
        "x_records_in_dropped_blocks")),
)  # fmt: skip

JUDGES = compose(JUDGING, KPROF)

FLAVOUR = Flavour(
    info=KPROF,
    judges=JUDGES,
    standard_run=_standard,
    exact_run=_exact,
    run_script=_script,
    peer_run=beside_perf(
        _standard,
        KprofRun,
        PeerHooks(
            samples=content_samples,  # its traces, one way (KprofRun.content)
            recording=_recording,
            sized=_standard_for,
            usual_ms=BUSY_MS,
            check=JUDGES.check,
        ),
    ),
    ops={
        "reader": OpRule(on=True),  # a background reader draining kpdata
        "kpctl-start": OpRule(),
        "kpctl-stop": OpRule(),
        "kpctl-flush": OpRule(),
        "kpctl-qlimit": OpRule(count_max=MAX_KIB),  # prof_qlimit <count KiB>
        "kpctl-cpubufsz": OpRule(count_max=MAX_KIB),  # prof_cpubufsz <count KiB>
        "kpdata": OpRule(count_max=MAX_KPDATA),  # one kernel trace, PC KPDATA_BASE + 8 count
        "fault-queue": OpRule(),  # kpctl's next open fails its queue allocation
        "kpctl-reopen": OpRule(),  # after the session: kpctl opened again (twice at most)
        # producer calls in task context: kernel PCs only, so the records are uniform
        "inject-task": OpRule(cpu="one", count_max=MAX_TASK),
    },
    op_steps={
        "kpctl-start": lambda cpu, count: ctl_step("start"),
        "kpctl-stop": lambda cpu, count: ctl_step("stop"),
        "kpctl-flush": lambda cpu, count: ctl_step("flush"),
        "kpctl-qlimit": lambda cpu, count: ctl_step(f"prof_qlimit {count}"),
        "kpctl-cpubufsz": lambda cpu, count: ctl_step(f"prof_cpubufsz {count}"),
        "kpdata": _kpdata_step,
        "inject-task": lambda cpu, count: inject_step(cpu, count, ctx="task"),
        "fault-queue": lambda cpu, count: fault_step("queue_alloc"),
        "kpctl-reopen": lambda cpu, count: profctl.mark_step(f"{GUEST_DIR}/kprof-reopen"),
    },
    extra_runs={"offline": offline_run, OVERLAP_RUN: overlap_run},  # overlap: the overlap watch's
    bench=KPROF_BENCH,
    budget_scenario=Path(__file__).with_name("kprof-budgets.toml"),  # C-3
    stress=STRESS,
    race_pairs=(
        RacePair("kprof's block offset", "percpu.{cpu}.x_records_committed", drive=SMALL_BLOCKS),
        RacePair("kprof's block hand-off", "percpu.{cpu}.x_blocks_full", drive=SMALL_BLOCKS),
    ),
)
