"""``invoke repro``: run a scenario into a bundle, or replay a bundle, and judge it.

A bundle is one directory that holds everything needed to read and replay a
run: the scenario as run (``scenario.toml``, ``scenario.json``), ``bundle.json``
(seed, images and agent identities, host facts, verdicts per attempt), the
generated agent sources and module, and per attempt the guest's console log,
QMP transcript, dmesg, ``run.json`` (exact QEMU argv and versions), the agent's
counters and the sample stream::

    result = run_scenario(load_scenario(find_scenario("tprof-tp-d1-quirk")), Cache.default())
    result.reproduced, result.attempts        # e.g. 3 of 3
    replay_bundle(result.bundle, Cache.default())   # same inputs, compared verdicts
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import arches, ktap
from harness.agent import profctl
from harness.agent.driver import Agent
from harness.agent.flavour import AgentLike, AgentRun, Flavour, Script, behaviour
from harness.agent.module.build import AgentBuild, export_agent
from harness.agent.oracles.evidence import kmemleak_command
from harness.agent.profctl_build import build_profctl
from harness.agent.steps import host_action_steps, inject_step, kick_step, probe_step
from harness.builder.cache import Cache, write_json_atomic
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelChoice
from harness.errors import ConfigError, GuestError, HarnessError, InfraError
from harness.scenarios.load import (
    Expectation,
    Scenario,
    Step,
    load_scenario,
    scenario_record,
    scenario_source,
)
from harness.timeouts import Timeouts
from harness.vm.accel import choose_accel
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import host_facts, new_run_dir
from harness.vm.snapstore import SnapshotStore, running_guest

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One expectation of a scenario, judged on one attempt."""

    expectation: str
    held: bool
    observed: str


@dataclass(frozen=True, slots=True)
class ReproResult:
    """Where the bundle is and how many attempts reproduced every expectation."""

    bundle: Path
    attempts: int
    reproduced: int
    verdicts: tuple[tuple[Verdict, ...], ...]


def program(scenario: Scenario, pause: Callable[[int], None], nmi: Callable[[], None]) -> Script:
    """Translate ``scenario.steps`` for its flavour.

    ``pause(ms)`` and ``nmi()`` act through QMP. The body ends by waiting for every
    busy loop it started.
    """
    flavour = behaviour(scenario.agent.flavour)
    cpus = range(scenario.guest.topology.cpus)
    body: list[str] = []
    actions: dict[str, Callable[[], None]] = {}
    injected: dict[int, int] = {}
    counts: dict[str, dict[int, int]] = {}
    switches: dict[str, bool] = {}
    kicks: int | None = 0
    for index, step in enumerate(scenario.steps):
        targets = list(cpus) if step.cpu == "all" else [int(step.cpu or 0)]
        if step.op == "inject":
            body.append(inject_step(step.cpu if step.cpu is not None else "all", step.count or 0))
            for cpu in targets:
                injected[cpu] = injected.get(cpu, 0) + (step.count or 0)
        elif step.op == "kick":
            body.append(kick_step(step.cpu if step.cpu is not None else "all"))
            kicks = kicks + 1 if kicks is not None and step.cpu == "all" else None
        elif step.op in ("pause", "inject-nmi"):
            name = f"{step.op}-{index}"
            body += host_action_steps(name)
            actions[name] = functools.partial(pause, step.ms or 0) if step.op == "pause" else nmi
        elif step.op in flavour.op_steps:
            made = flavour.op_steps[step.op](targets[0], step.count or 0)
            body += [made] if isinstance(made, str) else made  # an op may be several steps
            per_cpu = counts.setdefault(step.op, {})
            per_cpu[targets[0]] = per_cpu.get(targets[0], 0) + (step.count or 0)
        elif step.op in flavour.ops:  # a switch of the flavour's own
            switches[step.op] = bool(step.on)
        else:
            body += _simple(step)
    return Script(body=(*body, profctl.wait_step()), actions=actions, injected=injected,
                  op_counts=counts, switches=switches, kicks=kicks,
                  throttling_disabled=not scenario.throttling,
                  max_sample_rate=scenario.max_sample_rate)  # fmt: skip


def _simple(step: Step) -> list[str]:
    cpu = int(step.cpu) if isinstance(step.cpu, int) else 0
    table: dict[str, Callable[[], list[str]]] = {
        "spin": lambda: [profctl.spin_step(cpu, step.ms or 0)],
        "wait": lambda: [profctl.wait_step()],
        "idle": lambda: [profctl.sleep_step(step.ms or 0)],
        "probe": lambda: [probe_step(cpu, step.ms or 0)],
        "offline": lambda: [profctl.write_step(f"/sys/devices/system/cpu/cpu{cpu}/online", "0")],
        "online": lambda: [profctl.write_step(f"/sys/devices/system/cpu/cpu{cpu}/online", "1")],
    }
    return table[step.op]()


def observe(numbers: Mapping[str, int], name: str) -> int:
    """The number called ``name`` (a scenario's ``[[expect]] value``) of a run's ``numbers``.

    :raise InfraError: the run has no such number: the agent did not report it.
    """
    try:
        return numbers[name]
    except KeyError:
        raise InfraError(f"the run reported no number {name!r}: a stale agent build?") from None


def compare_numbers(attempts: Sequence[Mapping[str, int]]) -> dict[str, object]:
    """Which numbers were identical across attempts, and the ones that were not."""
    names = sorted(set().union(*attempts)) if attempts else []
    differing = {n: [a.get(n) for a in attempts] for n in names
                 if len({a.get(n) for a in attempts}) > 1}  # fmt: skip
    return {"numbers": len(names), "identical": len(names) - len(differing),
            "differing": differing}  # fmt: skip


def write_records(run: AgentRun, path: Path) -> Path:
    """The decoded record stream as CSV, one record a line."""
    rows = run.records()
    first = rows[0] if rows else None
    fields = [f.name for f in dataclasses.fields(first)] if dataclasses.is_dataclass(first) else []
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(fields)
        writer.writerows([getattr(row, f) for f in fields] for row in rows)
    return path


def judge(
    expect: Sequence[Expectation], run: AgentRun, flavour: Flavour, console: str = ""
) -> tuple[Verdict, ...]:
    """Every expectation against a run that completed.

    Oracles by name (``fails``: the oracle must fail), values by relation (the run's
    numbers derived once), console text in ``console`` (console and dmesg); an ``error``
    expectation does not hold: the run ended without one.
    """
    failed = {v.oracle: str(v) for v in flavour.check(run)}
    applies = flavour.applicable(run)
    numbers = run.numbers() if any(item.value is not None for item in expect) else {}
    verdicts = []
    for item in expect:
        if item.console is not None or item.error is not None:
            verdicts.append(_text_verdict(item, console, error=None))
        elif item.oracle is not None:
            if item.oracle not in applies:  # an oracle that judged nothing holds nothing
                verdicts.append(Verdict(item.describe(), False, "not applicable to this run"))
                continue
            broke = item.oracle in failed
            seen = failed[item.oracle] if broke else "holds"
            verdicts.append(Verdict(item.describe(), broke == item.fails, seen))
        else:
            value = observe(numbers, item.value or "")
            verdicts.append(Verdict(item.describe(), item.holds(value), str(value)))
    return tuple(verdicts)


def judge_error(expect: Sequence[Expectation], error: str, console: str) -> tuple[Verdict, ...]:
    """Every expectation against a run that ended in the guest error ``error``.

    ``error`` and ``console`` expectations are judged on the text; an oracle or a
    number of a run that never completed does not hold.
    """
    return tuple(
        _text_verdict(item, console, error=error)
        if item.console is not None or item.error is not None
        else Verdict(item.describe(), False, f"the run ended in an error: {error.splitlines()[0]}")
        for item in expect
    )


def _text_verdict(item: Expectation, console: str, error: str | None) -> Verdict:
    if item.console is not None:
        lines = [line.strip() for line in console.splitlines() if item.console in line]
        return Verdict(item.describe(), bool(lines), lines[0] if lines else "no such line")
    if error is None:
        return Verdict(item.describe(), False, "the run completed")
    first = error.splitlines()[0] if error else ""
    return Verdict(item.describe(), (item.error or "") in error, first)


def run_scenario(
    scenario: Scenario, cache: Cache, *, repeat: int | None = None, dump_memory: bool = False,
    out: Path | None = None, snapshot: bool = True,
) -> ReproResult:  # fmt: skip
    """Run ``scenario`` ``repeat`` times (default: its own count) into a new bundle.

    Each attempt restores the scenario's guest from its snapshot into a fresh QEMU
    (saved by a cold boot the first time); ``snapshot=False`` boots each cold. The
    bundle says which numbers were identical across the attempts. (Deterministic,
    input-free runs are `harness.scenarios.deterministic_bundle`'s.)

    :raise ConfigError: the scenario cannot run here (e.g. KVM demanded).
    :raise InfraError: the host side failed.
    """
    bundle = out or new_run_dir("repro", scenario.name)
    (bundle / "scenario.toml").write_text(scenario_source(scenario))
    (bundle / "scenario.json").write_text(json.dumps(scenario_record(scenario), indent=1) + "\n")
    guest_setup = scenario.guest
    arch = arches.get(guest_setup.arch)
    accel, why = choose_accel(arch, guest_setup.accel, cache)
    spec = MachineSpec(arch=arch, topology=guest_setup.topology, nmi=guest_setup.nmi,
                       accel=accel, kernel_args=guest_setup.kernel_args)  # fmt: skip
    images = prepare_images(arch, guest_setup.variant, cache,
                            kernel=KernelChoice(guest_setup.kernel))  # fmt: skip
    build = export_agent(scenario.agent, images, cache, bundle / "agent")
    attempts = repeat or scenario.repeat
    snapshots = SnapshotStore(cache, Timeouts.from_env()) if snapshot else None
    outcomes = [
        _attempt(scenario, spec, images=images, build=build, cache=cache,
                 workdir=bundle / f"attempt-{n + 1}", dump_memory=dump_memory,
                 snapshots=snapshots)
        for n in range(attempts)
    ]  # fmt: skip
    verdicts = tuple(verdict for verdict, _ in outcomes)
    reproduced = sum(all(v.held for v in attempt) for attempt in verdicts)
    record = {"scenario": scenario.name, "seed": scenario.seed, "accel": accel,
              "accel_reason": why, "images": images.record(), "agent": build.record(),
              "host": host_facts(), "attempts": attempts, "reproduced": reproduced,
              "verdicts": [[_verdict_dict(v) for v in one] for one in verdicts],
              "deterministic": False, "snapshot": snapshot,
              "across_attempts": compare_numbers([n for _, n in outcomes])}  # fmt: skip
    write_json_atomic(bundle / "bundle.json", record)
    write_bundle_ktap(bundle, scenario.name, verdicts)
    LOG.info("%s: %d of %d attempts reproduced every expectation; bundle %s",
             scenario.name, reproduced, attempts, bundle)  # fmt: skip
    return ReproResult(bundle, attempts, reproduced, verdicts)


def write_bundle_ktap(bundle: Path, scenario: str, verdicts: Sequence[Sequence[Verdict]]) -> Path:
    """The bundle's ``ktap.txt``: a KTAP test per attempt, a subtest per expectation."""
    results = [[(v.expectation, v.held, v.observed) for v in one] for one in verdicts]
    path = bundle / ktap.FILE
    path.write_text(ktap.render(ktap.from_attempts(scenario, results)))
    return path


def _verdict_dict(verdict: Verdict) -> dict[str, object]:
    return {"expectation": verdict.expectation, "held": verdict.held, "observed": verdict.observed}


def _attempt(
    scenario: Scenario, spec: MachineSpec, *, images: GuestImages, build: AgentBuild,
    cache: Cache, workdir: Path, dump_memory: bool, snapshots: SnapshotStore | None,
) -> tuple[tuple[Verdict, ...], dict[str, int]]:  # fmt: skip
    """One attempt in a guest of its own: the verdicts and the run's numbers.

    A scenario that expects a console report or an error (a defect's) keeps its
    verdicts when the guest's stop then finds that report on the console.
    """
    timeouts = Timeouts.from_env().for_variant(scenario.guest.variant)
    found: tuple[tuple[Verdict, ...], dict[str, int]] | None = None
    try:
        with running_guest(spec, images, workdir, timeouts=timeouts,
                           snapshots=snapshots) as guest:  # fmt: skip
            found = _attempt_in(scenario, spec, guest, images=images, build=build, cache=cache,
                                workdir=workdir, dump_memory=dump_memory)  # fmt: skip
    except GuestError as exc:
        reported = any(e.console is not None or e.error is not None for e in scenario.expect)
        if found is None or not reported:
            raise
        LOG.info("leaving the guest: %s (the scenario expects a report)", exc.reason)
    assert found is not None  # the with block ran to its end, or its error was raised
    return found


def _attempt_in(
    scenario: Scenario, spec: MachineSpec, guest: Guest, *, images: GuestImages,
    build: AgentBuild, cache: Cache, workdir: Path, dump_memory: bool,
) -> tuple[tuple[Verdict, ...], dict[str, int]]:  # fmt: skip
    agent = Agent(guest.shell, build, build_profctl(spec.arch, cache), workdir,
                  nmi_expected=spec.nmi, pmu_irq_label=spec.arch.pmu_interrupt_label,
                  cycles_per_ns=spec.arch.cycles_per_ns(spec.accel),
                  vmlinux=images.vmlinux, timeouts=guest.timeouts)  # fmt: skip
    agent.deploy()
    try:
        run = _run(scenario, agent, guest)
    except GuestError as exc:
        if any(item.error is not None for item in scenario.expect):
            return judge_error(scenario.expect, str(exc), _console(agent, guest)), {}
        if dump_memory and guest.vm.exitcode() is None:
            target = workdir / "guest-memory.elf"
            guest.vm.qmp.execute("dump-guest-memory",
                                 {"paging": False, "protocol": f"file:{target}"})  # fmt: skip
            LOG.info("guest memory dumped to %s", target)
        raise
    write_records(run, workdir / "samples.csv")
    flavour = behaviour(scenario.agent.flavour)
    return judge(scenario.expect, run, flavour, _console(agent, guest)), run.numbers()


def _console(agent: Agent, guest: Guest) -> str:
    """The attempt's console and dmesg; on the debug kernel kmemleak's report (its leaks)."""
    dmesg = ""
    with contextlib.suppress(HarnessError):
        dmesg = agent.shell.run("dmesg", timeout_s=30.0).stdout
        if guest.images.variant == "debug":
            dmesg += agent.shell.run(kmemleak_command(), timeout_s=90.0).stdout
    return guest.vm.console_text() + "\n" + dmesg


def _run(scenario: Scenario, agent: Agent, guest: Guest) -> AgentRun:
    def pause(ms: int) -> None:
        guest.vm.qmp.execute("stop")
        time.sleep(ms / 1000)  # the pause itself: the guest is frozen this long
        guest.vm.qmp.execute("cont")

    def nmi() -> None:
        guest.vm.qmp.execute("inject-nmi")

    return run_agent(scenario, agent, program(scenario, pause, nmi))


def run_agent(scenario: Scenario, agent: AgentLike, script: Script) -> AgentRun:
    """The scenario's run: its named whole-module run on every online CPU, or ``script``."""
    flavour = behaviour(scenario.agent.flavour)
    if scenario.run is None:
        return flavour.run_script(agent, scenario.agent, script)
    return flavour.runs[scenario.run](agent, scenario.agent, agent.online_cpus())


def replay_bundle(
    bundle: Path, cache: Cache, *, snapshot: bool | None = None
) -> tuple[ReproResult, list[str]]:
    """Run a bundle's recorded scenario again into a new bundle; compare verdicts.

    ``snapshot`` None restores snapshots as the bundle's run did; False boots cold.

    Returns the new result and the differences (images that changed, verdicts
    that differ). Images are rebuilt from the current tree; when their hashes
    differ from the bundle's, that is said first.
    """
    recorded = json.loads((bundle / "bundle.json").read_text())
    if recorded.get("deterministic"):
        raise ConfigError(f"{bundle} is a deterministic run's bundle: replay it with --replay")
    scenario = load_scenario(_as_named(bundle))
    new = run_scenario(scenario, cache, repeat=recorded["attempts"],
                       snapshot=recorded.get("snapshot", True) if snapshot is None
                       else snapshot)  # fmt: skip
    now = json.loads((new.bundle / "bundle.json").read_text())
    notes = [
        f"{key}: bundle {recorded['images'][key]} → now {now['images'][key]} (built from "
        "the current tree; the replay ran on the new image)"
        for key in ("kernel_sha256", "rootfs_sha256")
        if recorded["images"].get(key) != now["images"].get(key)
    ]
    if recorded["agent"].get("agent_sources") != now["agent"].get("agent_sources"):
        notes.append("agent sources differ: the templates changed since the bundle was made")
    before = [[(v["expectation"], v["held"]) for v in a] for a in recorded["verdicts"]]
    after = [[(v["expectation"], v["held"]) for v in a] for a in now["verdicts"]]
    if before != after:
        notes.append(f"verdicts differ: bundle {before} → replay {after}")
    return new, notes


def _as_named(bundle: Path) -> Path:
    """The bundle's scenario file under its own name (the loader checks name = stem)."""
    name = json.loads((bundle / "scenario.json").read_text())["name"]
    target = bundle / "replay" / f"{name}.toml"
    target.parent.mkdir(exist_ok=True)
    shutil.copy2(bundle / "scenario.toml", target)
    if not target.is_file():
        raise ConfigError(f"{bundle} has no scenario.toml; is it a repro bundle?")
    return target
