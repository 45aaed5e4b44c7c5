"""tprof's race runs: the plans that open the windows issue 10's fixed races need.

Each is an extra run of the flavour (`harness.agent.flavour.Flavour.extra_runs`),
judged by tprof's oracles like any run; on the debug kernel (`invoke mutants --full`,
the ``kasan`` case) KASAN judges the memory its mutant reaches::

    run = offline_stop_run(agent, AgentSpec(), (0, 1))
    run = stop_kick_run(agent, AgentSpec(), (0, 1))
    run = online_run(agent, AgentSpec(), (0, 1))
    run = burst_timeout_run(agent, AgentSpec(), (0, 1))
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from harness.agent import profctl
from harness.agent.flavour import AgentLike
from harness.agent.flavours.tprof.data import TPROF
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.flavours.tprof.run import (
    BACKGROUND,
    RunContext,
    judged_steps,
    read_kick_step,
    run_steps,
)
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import DEBUGFS, FD, GUEST_DIR, inject_step, kick_step
from harness.errors import ConfigError

#: A shell loop reading ``stats_percpu`` (it reads every CPU's current buffer under
#: tp.lock) until its first argument exists, at most its second argument times.
STATS_READER = f"{GUEST_DIR}/tprof-stats-reader.sh"
STATS_READER_SCRIPT = f"""\
n=0
while [ ! -e "$1" ] && [ "$n" -lt "$2" ]; do
    cat {DEBUGFS}/stats_percpu > /dev/null || exit 1
    n=$((n + 1))
done
echo "reads $n"
"""
#: Created after STOP: the reader's end.
STOPPED = f"{GUEST_DIR}/tprof-stopped"
#: The reader's bound, should the marker never come (a failed step).
STATS_READS_MAX = 100_000
#: The stop-kick run: S, and calls injected on every CPU before the read.
STOP_KICK_S, STOP_KICK_CALLS = 8, 12
#: The online run: how long the CPU stays out, and its busy loop once back (ms).
ONLINE_OUT_MS, ONLINE_SPIN_MS = 50, 300
#: The offline-stop run: S, calls injected on each online CPU per round, rounds.
OFFLINE_STOP_S, OFFLINE_STOP_CALLS, OFFLINE_STOP_ROUNDS = 8, 5, 2
#: The burst-timeout run: injections (one CPU each, in turn), calls per injection, the
#: period (4 ms: an overflow comes 0-4 ms after a burst is armed) and inject's wait
#: (1 ms: one jiffy at HZ=250, so the wait ends 0-4 ms after arming).
BURST_TIMEOUT_INJECTIONS, BURST_TIMEOUT_CALLS = 40, 20
BURST_TIMEOUT_PERIOD, BURST_TIMEOUT_WAIT_MS = 4_000_000, 1


def online_path(cpu: int) -> str:
    """The sysfs switch that takes ``cpu`` offline (0) and back (1)."""
    return f"/sys/devices/system/cpu/cpu{cpu}/online"


def offline_stop_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun:
    """A CPU offline from before START to after STOP, and a stats reader across STOP.

    START installs a buffer for every possible CPU, so the offline CPU's is still
    published at STOP, where ``tp_free_current`` takes and frees it under tp.lock
    (issue 10's fix; the ``free_outside_lock`` mutant frees it outside). Meanwhile a
    shell loop on the first CPU reads ``stats_percpu``, which reads every CPU's current
    buffer under that lock, from before STOP until STOP returned. Exact shape: bursts
    only, manual drain, S = 8, two rounds of {inject 5 on every online CPU, kick}. The
    CPU comes back online whatever happens. Needs a guest shell (not input-free).

    :raise ConfigError: fewer than two CPUs (CPU 0 cannot go offline).
    :raise InfraError: a step failed.
    """
    if len(cpus) < 2:
        raise ConfigError("tprof's offline_stop run needs two CPUs (CPU 0 cannot go offline)")
    outgoing, reader_cpu = cpus[-1], cpus[0]
    run_spec = replace(spec, drain="manual", pmu_produce=False).with_params(
        buffer_samples=OFFLINE_STOP_S
    )
    script = shlex.quote(STATS_READER_SCRIPT)
    agent.shell.run(f"mkdir -p {GUEST_DIR} && printf %s {script} > {STATS_READER} "
                    f"&& rm -f {STOPPED}", timeout_s=agent.timeouts.command_s)  # fmt: skip
    argv = ("/bin/sh", STATS_READER, STOPPED, str(STATS_READS_MAX))
    reader = profctl.exec_step(reader_cpu, f"{GUEST_DIR}/tprof-stats-reader.out", argv)
    body = (*(inject_step("all", OFFLINE_STOP_CALLS), kick_step()) * OFFLINE_STOP_ROUNDS, reader)
    injected = {cpu: OFFLINE_STOP_CALLS * OFFLINE_STOP_ROUNDS for cpu in cpus[:-1]}
    context = RunContext(injected=injected, kicks=OFFLINE_STOP_ROUNDS)
    steps = judged_steps(body, after_stop=(profctl.mark_step(STOPPED), profctl.wait_step()))
    agent.run_steps((profctl.write_step(online_path(outgoing), "0"),))
    try:
        return run_steps(agent, run_spec, steps, context)[0]
    finally:
        agent.run_steps((profctl.write_step(online_path(outgoing), "1"),))


def online_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun:
    """The last of ``cpus`` goes offline and comes back while every CPU samples (PMU on).

    ``spec`` as given (the standard run's: auto drain, the PMU producing). After START
    the CPU goes out for `ONLINE_OUT_MS`, comes back, and a busy loop runs on it for
    `ONLINE_SPIN_MS`. Coming back, the core sets up the flavour's per-CPU state before it
    arms the CPU (issue 10's fix), so no overflow finds it without a buffer (ONLINE);
    the ``online_arm_first`` mutant arms first and holds the window open. The CPU comes
    back online whatever happens.

    :raise ConfigError: fewer than two CPUs (CPU 0 cannot go offline).
    :raise InfraError: a step failed.
    """
    if len(cpus) < 2:
        raise ConfigError("tprof's online run needs two CPUs (CPU 0 cannot go offline)")
    cpu = cpus[-1]
    body = (
        profctl.write_step(online_path(cpu), "0"),
        profctl.sleep_step(ONLINE_OUT_MS),
        profctl.write_step(online_path(cpu), "1"),
        profctl.spin_step(cpu, ONLINE_SPIN_MS),
        profctl.wait_step(),
    )
    try:
        return run_steps(agent, spec, judged_steps(body), RunContext())[0]
    finally:
        agent.run_steps((profctl.write_step(online_path(cpu), "1"),))


def read_kick_checked_step(ms: int) -> str:
    """Block until a kick of the read armed by `read_kick_step` passed its running check."""
    return profctl.write_step(f"{DEBUGFS}/read_kick", f"wait checked ms={ms}")


def stop_kick_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun:
    """STOP sent while a kick is past its running check: STOP must refuse that kick's swap.

    S = 8, bursts only, manual drain: {inject 12 on every CPU, kick} queues a buffer per
    CPU; a background reader (one record per read) takes the head one and the
    ``read_kick`` hook kicks every CPU inside that read; STOP follows as soon as one of
    those kicks passed its running check (``read_kick`` ``wait checked``). Fixed, that
    kick swaps before STOP's final swap or is refused after it, and no CPU holds a
    buffer after STOP (STOPPED). TP-O2 does not apply: how many of the read's kicks
    STOP overtakes is the race itself. The reader reads to EOF after STOP.

    :raise InfraError: a step failed, or no kick passed its check in a quarter of the
        scaled command budget.
    """
    run_spec = replace(spec, drain="manual", pmu_produce=False).with_params(
        buffer_samples=STOP_KICK_S
    )
    body = (
        inject_step("all", STOP_KICK_CALLS),
        kick_step(),
        read_kick_step(),
        profctl.timeout_step(60),  # the reader's own limit: it ends at EOF after STOP
        profctl.readbg_step(FD, BACKGROUND, TPROF.record.size),
        read_kick_checked_step(int(agent.timeouts.command_s * 250)),
    )
    context = RunContext(injected=dict.fromkeys(cpus, STOP_KICK_CALLS), background_reader=True)
    steps = judged_steps(body, after_stop=(profctl.wait_step(),))
    return run_steps(agent, run_spec, steps, context)[0]


def burst_timeout_run(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> TprofRun:
    """Injections whose wait ends about when an overflow takes their burst (issue 10's race).

    `BURST_TIMEOUT_INJECTIONS` bursts of `BURST_TIMEOUT_CALLS` calls, one CPU at a
    time in turn, bursts only, at a 4 ms period, each ``inject`` waiting one jiffy: the
    overflow and the wait's end are each 0-4 ms after arming, so about half the
    injections time out, some as an overflow takes the burst. The module's contract
    (issue 10's fix: the overflow takes the burst with xchg and marks it busy; the
    injector takes back with xchg what no overflow took and waits out a busy one):
    ETIMEDOUT means the burst was taken back whole and produced nowhere, success that
    it was produced whole. The run's injections are the successful steps', and CALLS
    holds the producer calls to them exactly; the ``burst_take_plain`` mutant produces
    a burst its injector took back (or loses the next one).

    :raise InfraError: a step failed otherwise than an ``inject`` by ETIMEDOUT.
    """
    run_spec = replace(spec, pmu_produce=False, period=BURST_TIMEOUT_PERIOD)
    body = tuple(inject_step(cpus[i % len(cpus)], BURST_TIMEOUT_CALLS)
                 for i in range(BURST_TIMEOUT_INJECTIONS))  # fmt: skip
    context = RunContext(burst_wait_ms=BURST_TIMEOUT_WAIT_MS, injections_may_time_out=True)
    return run_steps(agent, run_spec, judged_steps(body), context)[0]
