"""Deterministic scenario runs: ``--deterministic`` twice alike, ``--record`` and ``--replay``.

The guest runs the scenario input-free (`harness.scenarios.inputfree`) under one TCG
thread, ``-icount shift=0,sleep=off``, a fixed ``-seed`` and a virtual-time RTC,
with no network (`harness.vm.argv.DeterministicRun`). ``deterministic`` runs it N
times and compares every number; ``record`` (1 vCPU: QEMU 7.2's limit) also writes QEMU's
record/replay log, and `replay_deterministic` replays a bundle and compares every number with
the recorded ones; with ``gdb`` the replay waits for a debugger on QEMU's gdbstub::

    scenario = load_scenario(find_scenario("tprof-tp-d1-quirk"))
    result = run_deterministic(scenario, Cache.default(), mode="record", attempts=1)
    again = replay_deterministic(result.repro.bundle, Cache.default())
    differing(again.rows)          # [] : every recorded number came back

The bundle holds what a replay needs (`harness.scenarios.deterministic_bundle`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.agent.driver import Agent
from harness.agent.flavour import AgentRun, Script, behaviour
from harness.agent.module.build import AgentBuild
from harness.agent.module.spec import PMU_EVENTS
from harness.agent.steps import GUEST_DIR
from harness.builder.images import BootFiles
from harness.errors import EnvironmentMismatch, GuestError, HarnessTimeout, InfraError
from harness.process import run_logged
from harness.scenarios.identity import NumberRow
from harness.scenarios.inputfree import (
    Collected,
    CollectedShell,
    GuestPlan,
    PlanningShell,
    action_line,
    input_free_body,
    parse_results,
    plan_run,
)
from harness.scenarios.load import Scenario
from harness.scenarios.repro import (
    ReproResult,
    Verdict,
    judge,
    program,
    run_agent,
    write_records,
)
from harness.scenarios.witnessing import (
    WitnessPlan,
    WitnessReport,
    judge_witnessed,
    unjudged_witness,
)
from harness.timeouts import Timeouts, wait_until
from harness.vm.argv import DeterministicKind, DeterministicRun, MachineSpec
from harness.vm.machine import GuestVM
from harness.vm.preflight import FACTS_COMMAND, check_facts, parse_facts, split_sections
from harness.vm.record import RunRecord, spec_record
from harness.vm.witness.records import WitnessLog
from harness.vm.witness.session import Witness, free_tcp_port

LOG = logging.getLogger(__name__)
#: How long a --gdb replay may stay open: a debugging session, not a test.
GDB_SESSION_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class DeterministicSetup:
    """What every attempt of one deterministic run shares."""

    scenario: Scenario
    spec: MachineSpec  # without `DeterministicRun`: each attempt adds its own
    kernel: Path
    vmlinux: Path  # the kernel with its symbols, for gdb
    initrd: Path  # the rootfs with the extra cpio appended
    plan: GuestPlan
    script: Script
    build: AgentBuild
    profctl: Path
    timeouts: Timeouts
    witness: WitnessPlan | None = None  # where gdbside finds the handler (None: unwitnessed)


@dataclass(frozen=True, slots=True)
class DeterministicAttempt:
    """One input-free run, judged."""

    workdir: Path
    verdicts: tuple[Verdict, ...]
    numbers: Mapping[str, int]
    argv: tuple[str, ...]
    wall_s: float
    module_text: str  # where the agent's code was loaded ("" if unknown)
    witness: WitnessReport | None = None  # what the witness saw, judged (None: unwitnessed)


@dataclass(frozen=True, slots=True)
class DeterministicResult:
    """A deterministic run or replay: the bundle, its verdicts and the number comparison."""

    repro: ReproResult
    rows: tuple[NumberRow, ...]
    headers: tuple[str, ...]  # what each value column of ``rows`` is
    wall_s: tuple[float, ...]
    notes: tuple[str, ...] = ()  # what the run did otherwise than an SSH run would
    witnessed: tuple[WitnessReport, ...] = ()  # per attempt, where the witness watched
    witness_labels: tuple[str, ...] = ()  # which attempt each of ``witnessed`` is
    witness_logs_identical: bool | None = None  # every attempt's log alike (None: < 2)


def input_free_script(scenario: Scenario) -> Script:
    """The scenario's steps as an input-free guest runs them (host actions not awaited)."""
    script = program(scenario, lambda _ms: None, lambda: None)
    body = input_free_body(script.body, tuple(script.actions))
    return replace(script, body=body, actions={}, instruction_clock=True)  # -icount shift=0


#: Why a ``--deterministic`` run leaves a scenario's host actions (``pause``) out.
SKIPPED_ACTIONS = (
    "not performed under --deterministic: a QMP stop lands on a host-chosen instruction "
    "and restarts QEMU 7.2's round-robin slice of vCPUs, so the interleaving (and 16 of 92 "
    "numbers of nmi-ab-on) changed from run to run; the guest cannot see the pause itself "
    "(its clocks count instructions). --record performs it (rr logs it)"
)


def skipped_actions(scenario: Scenario) -> tuple[str, ...]:
    """The host actions a ``--deterministic`` run of ``scenario`` leaves out, by marker name."""
    return tuple(program(scenario, lambda _ms: None, lambda: None).actions)


def host_actions(scenario: Scenario, vm: GuestVM) -> dict[str, Callable[[], None]]:
    """Marker name → the QMP action the host performs when the guest reaches it."""

    def pause(ms: int) -> None:
        vm.qmp.execute("stop")
        time.sleep(ms / 1000)  # invisible to the guest: its clocks are virtual
        vm.qmp.execute("cont")

    return dict(program(scenario, pause, lambda: vm.qmp.execute("inject-nmi")).actions)


def agent_for(
    setup: DeterministicSetup, shell: PlanningShell | CollectedShell, workdir: Path
) -> Agent:
    """The same `Agent` an SSH run uses, over ``shell``."""
    arch = setup.spec.arch
    return Agent(shell, setup.build, setup.profctl, workdir, nmi_expected=setup.spec.nmi,
                 pmu_irq_label=arch.pmu_interrupt_label,
                 cycles_per_ns=arch.cycles_per_ns(setup.spec.accel),
                 timeouts=setup.timeouts, vmlinux=setup.vmlinux)  # fmt: skip


def plan_guest(setup: DeterministicSetup, workdir: Path) -> GuestPlan:
    """The commands the guest runs: the preflight facts, then the agent's, up to profctl."""
    shell = PlanningShell(cpus=setup.spec.topology.cpus, events=tuple(PMU_EVENTS.values()),
                          profctl=f"{GUEST_DIR}/profctl")  # fmt: skip

    def drive(planning: PlanningShell) -> object:
        planning.run(FACTS_COMMAND)
        return run_agent(setup.scenario, agent_for(setup, planning, workdir), setup.script)

    return plan_run(drive, shell)


def attempt(setup: DeterministicSetup, run: DeterministicRun, workdir: Path,
            on_gdb: Callable[[int], None] = lambda _: None) -> DeterministicAttempt:  # fmt: skip
    """Boot the input-free guest under ``run``, wait for it to power off, judge it.

    With a gdbstub, the guest stays stopped at its first instruction; a snapshot
    (``start``, in ``run.snapshots``) is taken there, so gdb can execute backwards,
    and ``on_gdb(port)`` is told; the wait lasts the debugging session. The workdir
    gets ``run.json`` (argv, spec, mode, timing, verdict) as every guest run does.

    :raise GuestError: the guest crashed, hung, or reported a failed environment.
    :raise InfraError: QEMU or the results channel failed.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    spec = replace(setup.spec, deterministic=run)
    record = RunRecord(workdir / "run.json")
    record.update(spec=spec_record(spec), deterministic={"kind": run.kind, "seed": run.seed,
                  "rr_file": str(run.rr_file) if run.rr_file else None})  # fmt: skip
    try:
        vm, wall_s, log = _run_guest(setup, spec, workdir, on_gdb)
        record.update(argv=list(vm.argv))
        record.add_timing("launch_to_poweroff", wall_s)
        collected = parse_results(vm.console_text())
        verdicts, agent_run = judge_collected(setup, collected, workdir)
        numbers = agent_run.numbers()
        seen = None if log is None else _judge_witness(setup, agent_run, log, workdir)
    except BaseException as exc:
        record.finish(exc)
        raise
    record.finish(None)
    LOG.info("%s: %s run took %.1fs", vm.name, run.kind, wall_s)
    (workdir / "profagent.text").write_text(collected.module_text + "\n")
    if seen is not None:
        numbers = {**numbers, **seen.numbers()}
    return DeterministicAttempt(workdir, verdicts, numbers, vm.argv, wall_s, collected.module_text,
                                seen)  # fmt: skip


def attempt_apart(setup: DeterministicSetup, run: DeterministicRun,
                  workdir: Path) -> DeterministicAttempt:  # fmt: skip
    """`attempt`, for the witnessed attempt of a multi-vCPU guest, run beside the compared ones.

    A guest that did not power off in time there is UNJUDGED by the witness, not an
    error of the run: beside other guests its gdb stops can leave it stuck (README,
    "Deterministic runs": with four guests on two host cores, nmi-ab-on's stopped after
    224 and 250 overflows), and the compared attempts of the same guest finished. A crash
    (panic, oops) is still raised.

    :raise GuestError: the guest crashed.
    :raise InfraError: QEMU or the results channel failed.
    """
    started = time.monotonic()
    try:
        return attempt(setup, run, workdir)
    except GuestError as exc:
        if not isinstance(exc.__cause__, HarnessTimeout):
            raise
        why = f"the witnessed attempt did not finish: {exc.reason}"
        LOG.warning("%s (console: %s)", why, exc.console_log)
        return DeterministicAttempt(workdir, (), {}, (), time.monotonic() - started, "",
                                    unjudged_witness(why))  # fmt: skip


def _judge_witness(setup: DeterministicSetup, run: AgentRun, log: WitnessLog,
                   workdir: Path) -> WitnessReport:  # fmt: skip
    """The witnessed overflows judged against the run; ``witness.json`` written."""
    spec = setup.scenario.agent
    flavour = behaviour(spec.flavour)
    report = judge_witnessed(run, log, spec=spec, info=flavour.info,
                             nmi_expected=setup.spec.nmi and spec.event != "cpu-clock")  # fmt: skip
    (workdir / "witness.json").write_text(json.dumps(report.as_dict(), indent=1) + "\n")
    LOG.info("%s", report.summary())
    return report


def _run_guest(
    setup: DeterministicSetup, spec: MachineSpec, workdir: Path, on_gdb: Callable[[int], None]
) -> tuple[GuestVM, float, WitnessLog | None]:
    """Launch QEMU, start the guest (or hand it to gdb, or to the witness), await power-off."""
    run = spec.deterministic
    assert run is not None
    started = time.monotonic()
    vm = GuestVM(spec, BootFiles(setup.kernel, setup.initrd), workdir, name=spec.name,
                 timeouts=setup.timeouts)  # fmt: skip
    if run.snapshots is not None:
        run_logged(["qemu-img", "create", "-f", "qcow2", str(run.snapshots), "4G"],
                   log=workdir / "qemu-img.log", what="creating the replay's snapshot file",
                   timeout_s=setup.timeouts.command_s)  # fmt: skip
    log = None
    with vm, _witness(setup, run, workdir) as witness:
        if run.gdb_port is not None:
            said = vm.qmp.hmp("savevm start").strip()  # reverse execution seeks from it
            if said:
                raise InfraError(f"QEMU could not take the replay's snapshot: {said}")
            on_gdb(run.gdb_port)
        elif witness is None:  # QMP is idle from here on: nothing host-timed reaches the vCPUs
            vm.qmp.execute("cont")
        # Only a recording performs host actions: rr logs them, and the replay repeats
        # them from the log. See `SKIPPED_ACTIONS` for why a deterministic run does not.
        actions = host_actions(setup.scenario, vm) if run.kind == "record" else {}
        _await_poweroff(vm, actions, _budget_s(setup.timeouts, run, spec.topology.cpus))
        if witness is not None:
            log = witness.finish(timeout_s=setup.timeouts.qmp_s * 3)
    vm.check_console(what=f"{vm.name} during its input-free run")
    if vm.exitcode() != 0:  # a guest power-off exits 0; e.g. a cut rr log exits 1
        output = vm.qemu_log.read_text(errors="replace").strip()[-2000:]
        raise InfraError(f"QEMU exited with status {vm.exitcode()} during the {run.kind} "
                         f"run: {output or 'no output'} (log {vm.qemu_log})")  # fmt: skip
    return vm, time.monotonic() - started, log


@contextlib.contextmanager
def _witness(setup: DeterministicSetup, run: DeterministicRun,
             workdir: Path) -> Iterator[Witness | None]:  # fmt: skip
    """Gdb on the command line's gdbstub, watching for the handler (None: unwitnessed).

    Its ``continue`` starts the guest: QMP sends nothing. gdb is stopped by its PID on
    the way out, whatever happened.
    """
    plan = setup.witness
    if run.witness_port is None or plan is None:
        yield None
        return
    with Witness(None, plan.offsets, workdir / "witness", setup.timeouts, depth=plan.depth,
                 nmi_on=plan.nmi_on, port=run.witness_port) as witness:  # fmt: skip
        witness.watch(plan.discovery)
        yield witness


#: vCPUs one command budget covers in an input-free run (see `_budget_s`).
VCPUS_PER_BUDGET = 8


def _budget_s(timeouts: Timeouts, run: DeterministicRun, vcpus: int) -> float:
    """How long an input-free run may take before it counts as hung.

    One TCG thread runs every vCPU in turn, so a run that keeps each CPU busy costs
    host time in proportion to its vCPUs: two command budgets per `VCPUS_PER_BUDGET`
    of them. Measured for hwpmc's standard run on 40 vCPUs: 255, 295 and 348 s on a
    host with a second guest beside it, and over the flat 360 s (boot + 2 commands)
    in a cold CI run with kernels compiling beside it.
    """
    if run.gdb_port is not None:
        return GDB_SESSION_S
    return timeouts.boot_s + 2 * timeouts.command_s * -(-vcpus // VCPUS_PER_BUDGET)


def _await_poweroff(vm: GuestVM, actions: Mapping[str, Callable[[], None]],
                    budget_s: float) -> None:  # fmt: skip
    """Wait for QEMU to exit (the guest powers off), performing host actions on cue."""
    pending = dict(actions)

    def done() -> bool | None:
        if pending:
            text = vm.console_text()
            for name in [n for n in pending if action_line(n) in text]:
                pending.pop(name)()
        return True if vm.exitcode() is not None else None

    try:
        wait_until(done, timeout_s=budget_s, interval_s=0.1,
                   what=f"{vm.name} to run its scenario and power off")  # fmt: skip
    except HarnessTimeout as exc:
        vm.check_console(what=f"{vm.name} during its input-free run")
        tail = "\n".join(vm.console_text().splitlines()[-20:])
        raise GuestError(f"{vm.name} did not finish its input-free run and power off within "
                         f"{budget_s:.0f}s", tail, vm.console_log) from exc  # fmt: skip


def judge_collected(
    setup: DeterministicSetup, collected: Collected, workdir: Path
) -> tuple[tuple[Verdict, ...], AgentRun]:
    """Run the scenario's runner over what the guest reported; its verdicts and the run.

    :raise EnvironmentMismatch: the guest is not the machine asked for (preflight).
    :raise InfraError: the guest ran other commands than the runner sends.
    """
    shell = CollectedShell(setup.plan.commands, collected)
    facts_text = shell.run(FACTS_COMMAND).stdout
    (workdir / "dmesg.boot.txt").write_text(split_sections(facts_text).get("dmesg", ""))
    (workdir / "dmesg.txt").write_text(collected.dmesg)
    problems = check_facts(setup.spec, parse_facts(facts_text))
    if problems:
        raise EnvironmentMismatch(f"{setup.spec.name} is not the guest that was asked for",
                                  problems)  # fmt: skip
    run = run_agent(setup.scenario, agent_for(setup, shell, workdir), setup.script)
    write_records(run, workdir / "samples.csv")
    return judge(setup.scenario.expect, run, behaviour(setup.scenario.agent.flavour)), run


def deterministic_run(kind: DeterministicKind, seed: int, rr_file: Path | None = None,
                      gdb_dir: Path | None = None, *,
                      witness: bool = False) -> DeterministicRun:  # fmt: skip
    """One attempt's `DeterministicRun`; with ``gdb_dir``, a free gdbstub port and snapshot file.

    ``witness``: a free gdbstub port for the witness (a ``deterministic`` run only).
    """
    if gdb_dir is None:
        port = free_tcp_port() if witness else None
        return DeterministicRun(kind=kind, seed=seed, rr_file=rr_file, witness_port=port)
    return DeterministicRun(kind=kind, seed=seed, rr_file=rr_file, gdb_port=free_tcp_port(),
                            snapshots=gdb_dir / "snapshots.qcow2")  # fmt: skip
