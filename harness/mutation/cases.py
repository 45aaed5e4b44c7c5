"""One case of a mutation run: a build's agent on a guest through one run, judged.

A case is one of a flavour's runs (``standard``, ``exact``, ``peer``, an extra run) of
one build, the control or a mutant. What failed is the oracles its violations name, plus
the UNJUDGED tokens of the oracles its mutants rely on (``RUN-ERROR`` when the run itself
failed). A build's row merges its cases by the catalogue's rule
(`harness.agent.mutants.merge`)::

    bench = Bench(arch, cache, cpus=(0, 1), timeouts=Timeouts.from_env(), out=out)
    with mutation_guest(bench, images, "default") as guest:
        failed = run_case(bench, guest, images, behaviour("tprof"), mutant, "standard")
    mutant_row(behaviour("tprof"), mutant, [("standard", failed)])
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.agent import mutants
from harness.agent.driver import Agent
from harness.agent.flavour import AgentRun, Flavour
from harness.agent.module.build import build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import MutantRow, merge
from harness.agent.oracles.report import unjudged
from harness.agent.profctl_build import build_profctl
from harness.agent.truth.nmitrace import (
    TRACED_CASE,
    TRACED_VARIANT,
    arm_command,
    collect_command,
    nmi_trace,
)
from harness.agent.values.info import Mutant
from harness.agent.values.results import Judged
from harness.agent.witnessed import WITNESS_CASE, witnessed_run
from harness.arches import ArchProfile
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.errors import ConfigError, HarnessError
from harness.mutation.plan import planned
from harness.scenarios.stress import STRESS_CASE, run_plan
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.topology import default_topology

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Bench:
    """What every mutation run shares."""

    arch: ArchProfile
    cache: Cache
    cpus: tuple[int, ...]
    timeouts: Timeouts
    out: Path


def run_case(bench: Bench, guest: Guest, images: GuestImages, flavour: Flavour,
             mutant: Mutant | None, case: str) -> set[str]:  # fmt: skip
    """The oracles that failed in ``case`` (``RUN-ERROR`` when the run itself failed)."""
    return judge_case(bench, guest, images, flavour, mutant, case)[0]


def judge_case(bench: Bench, guest: Guest, images: GuestImages, flavour: Flavour,
               mutant: Mutant | None, case: str,
               ) -> tuple[set[str], AgentRun | None, tuple[Judged, ...]]:  # fmt: skip
    """The oracles that failed in ``case``, the run (None when it failed), what it compared.

    The ``witness`` case is the standard run with the emulator's witness armed
    (`harness.agent.witnessed`): WITNESS judges it beside the flavour's oracles.
    """
    mark = guest.console_lines()
    agent = deploy_agent(bench, guest, images, flavour.name, mutant)
    traced = images.variant == TRACED_VARIANT and case == TRACED_CASE  # the kernel's tracer
    agent.nmi_trace = arm_command() if traced else None
    spec = AgentSpec(flavour=flavour.name)
    runner = flavour.peer_run if case == "peer" else flavour.runs.get(case)
    if runner is None and case not in (WITNESS_CASE, STRESS_CASE):
        raise ConfigError(f"flavour {flavour.name} has no {case} run")
    try:
        if case == WITNESS_CASE:
            done = witnessed_run(agent, guest, bench.cache, flavour, bench.cpus)
            run, violations, judged = done.run, list(done.violations), done.judged
        elif case == STRESS_CASE:
            topology = default_topology(len(bench.cpus))
            cases = run_plan(agent, flavour.name, topology.name, topology.cpus,
                             agent.workdir / "stress")  # fmt: skip
            run = cases[-1].run
            violations = [v for c in cases for v in c.violations]
            violations += [v for c in cases for v in c.unmet()]
            judged = tuple(j for c in cases for j in (*flavour.judged(c.run), *c.judged()))
        else:
            assert runner is not None
            run = runner(agent, spec, bench.cpus)
            violations, judged = flavour.check(run), tuple(flavour.judged(run))
    except HarnessError as exc:
        LOG.warning("mutant %s, %s, %s: the run failed: %s", name_of(mutant), flavour.name,
                    case, exc)  # fmt: skip
        failed = {"RUN-ERROR"} | _console(guest, mark, agent.workdir / f"console-{case}.txt")
        return failed, None, ()
    failed = {v.oracle for v in violations} | _unjudged(judged, mutant, flavour.name, case)
    if traced:
        failed |= _traced(guest, agent, f"{name_of(mutant)}, {flavour.name}, {case}")
    failed |= _console(guest, mark, agent.workdir / f"console-{case}.txt")
    # The run's table and verdicts beside its evidence: what a catch or a survivor rests on.
    (agent.workdir / f"report-{case}.txt").write_text(flavour.report(run, violations) + "\n")
    LOG.info("mutant %s, %s, %s: failed %s", name_of(mutant), flavour.name, case,
             ", ".join(sorted(failed)) or "none")  # fmt: skip
    return failed, run, judged


def _traced(guest: Guest, agent: Agent, what: str) -> set[str]:
    """``{"C-2"}`` when the kernel's tracer saw the NMI entry call a forbidden function.

    The evidence (`harness.agent.truth.nmitrace`) is the kernel's, not the agent's:
    it sees a call the module's static graph could not follow.
    """
    text = guest.shell.run(collect_command(), timeout_s=agent.timeouts.command_s).stdout
    trace = nmi_trace(text)
    (agent.workdir / "nmi-trace.txt").write_text("\n".join(map(str, trace.forbidden)) + "\n")
    LOG.info("mutant %s: function_graph from the NMI entry: %d entries, %d calls, %d forbidden%s",
             what, trace.entries, trace.calls, len(trace.forbidden),
             " (the tracer's ring overran)" if trace.lost else "")  # fmt: skip
    return {"C-2"} if trace.forbidden else set()


def _console(guest: Guest, since_line: int, evidence: Path) -> set[str]:
    """``{"CONSOLE"}`` when the guest printed a WARN, an oops or a report during the case.

    A mutant's (the wrapped NMI trylock's WARN) is a catch of its row; the control's
    fails the control. Either way the findings are this case's, kept in ``evidence``,
    and the guest's check on leaving starts after them.
    """
    findings = guest.judge_console(since_line)
    if not findings:
        return set()
    evidence.write_text("\n\n".join(f"{f}\n{f.context}" for f in findings) + "\n")
    LOG.warning("%s printed %s during the case (%s)", guest.name,
                ", ".join(sorted({f.kind for f in findings})), evidence)  # fmt: skip
    return {"CONSOLE"}


def compared(judged: Sequence[Judged], oracles: Iterable[str]) -> set[str]:
    """Those of ``oracles`` that compared something (n > 0, held or not) by ``judged``."""
    return {name for name in oracles if not unjudged(judged, (name,))}


def relied_on(plan: Iterable[tuple[Mutant | None, tuple[str, ...]]],
              within: tuple[str, ...]) -> set[str]:  # fmt: skip
    """The oracles the mutants of ``plan`` whose cases lie ``within`` are caught by.

    A control run through ``within`` must see each of them compare something in one of
    those cases: a control whose oracle judged nothing is not clean (issue 45), and a
    catch by that oracle would rest on nothing.
    """
    tokens = {t for m, cases in plan if m is not None and set(cases) <= set(within)
              for t in m.caught_by}  # fmt: skip
    return {mutants.unjudged_oracle(t) or t for t in tokens}


def _unjudged(judged: Sequence[Judged], mutant: Mutant | None, flavour: str,
              case: str) -> set[str]:  # fmt: skip
    """The `unjudged_token` of each oracle the case's UNJUDGED mutants rely on that judged nothing.

    A mutant caught by ``PROFILE:UNJUDGED`` relies on PROFILE comparing something in an
    unmutated run: the control of its case is held to it, and so is the mutant.
    """
    tokens = mutant.caught_by if mutant else tuple(
        t for m in planned(flavour, full=True, case=case) for t in m.caught_by)  # fmt: skip
    relied = {o for t in tokens if (o := mutants.unjudged_oracle(t))}
    return {mutants.unjudged_token(name) for name in relied if unjudged(judged, (name,))}


def deploy_agent(bench: Bench, guest: Guest, images: GuestImages, flavour: str,
                 mutant: Mutant | None) -> Agent:  # fmt: skip
    """``mutant``'s build of ``flavour``'s agent (built or cached), deployed in ``guest``."""
    build = build_agent(AgentSpec(flavour=flavour), images, bench.cache, mutant=name_of(mutant))
    workdir = bench.out / guest.name / f"{flavour}-{name_of(mutant)}"
    workdir.mkdir(parents=True, exist_ok=True)
    agent = Agent(guest.shell, build, build_profctl(bench.arch, bench.cache), workdir,
                  nmi_expected=True, pmu_irq_label=bench.arch.pmu_interrupt_label,
                  cycles_per_ns=bench.arch.cycles_per_ns("tcg"),
                  timeouts=bench.timeouts, vmlinux=images.vmlinux)  # fmt: skip
    agent.deploy()
    return agent


def mutation_guest(bench: Bench, images: GuestImages, name: str, *, timeout_scale: float = 1,
                   kernel_args: tuple[str, ...] = ()) -> Guest:  # fmt: skip
    """A TCG guest called ``name`` with pseudo-NMIs on ``bench``'s vCPUs, not yet booted."""
    spec = MachineSpec(arch=bench.arch, topology=default_topology(len(bench.cpus)), nmi=True,
                       accel="tcg", kernel_args=kernel_args)  # fmt: skip
    timeouts = bench.timeouts.scaled_by(timeout_scale)
    return Guest(spec, images, bench.out / name, timeouts=timeouts, name=name)


def mutant_row(flavour: Flavour, mutant: Mutant | None, cases: list[tuple[str, set[str]]],
               notes: Iterable[str] = (), *, unjudged: bool = False) -> MutantRow:  # fmt: skip
    """The row of ``mutant`` (None: the control) in ``flavour``, merged from ``cases``."""
    expected = mutant.caught_by if mutant else ()
    return merge(name_of(mutant), flavour.name, expected, cases, tuple(notes), unjudged=unjudged)


def caught(mutant: Mutant, cases: list[tuple[str, set[str]]]) -> bool:
    """Whether ``cases`` already catch ``mutant``, by the row's own rule (`MutantRow.verdict`)."""
    return merge(mutant.name, "", mutant.caught_by, cases).verdict == "caught"


def name_of(mutant: Mutant | None) -> str:
    """``mutant``'s name, or the control's (`harness.agent.mutants.NONE`)."""
    return mutant.name if mutant else mutants.NONE
