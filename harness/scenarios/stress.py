"""The shared stress plan: every flavour, in the tree or outside, through the same cases.

A flavour declares what the plan needs as data (`harness.agent.values.stress.Stress`);
the plan is scenarios (`scenarios/FORMAT.md`) written from it for the guest's topology,
each judged by its expectations and by every oracle of the flavour. A case's file is
kept, and ``invoke repro FILE`` replays it. The cases:

* ``fill``: every CPU's buffer filled past its capacity, CPU c by ``granule x (1 + c mod
  3)`` records (a different number on neighbours, so a count landing on the wrong CPU
  shows); per CPU the full counter must read exactly that, the records kept the
  capacity, every other drop cause 0. A buffer shared by the machine (kprof's queue)
  fills from CPU 0, and the sums are judged.
* ``cause-<counter>``: one drop cause provoked on its own on CPU 0: that counter reads
  the flavour's declared count, every other cause its declared value (0), on every CPU.
  So a drop counted under the wrong cause fails, not only one counted nowhere.
* ``reader``: a reader runs all through busy loops on every CPU (the PMU producing).
* ``restart``: a stop and start while the busy loops run.
* ``exact``: the flavour's own exact run.

What a flavour did not declare is in `StressPlan.missing`, with why: each is UNJUDGED
in the verdict, never passed::

    plan = stress_plan("dt", behaviour("dt").stress, "1s1cl2c1t", cpus=2)
    [c.name for c in plan.cases]  # ['fill', 'cause-dc_recurevt', 'cause-dc_skiptick', ...]
    plan.missing                  # () : every case is in
    checked = run_case(agent, plan.cases[0], out_dir)   # the shell: run and judge one case
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.agent.flavour import AgentLike, AgentRun, behaviour
from harness.agent.values.results import Judged, Violation
from harness.agent.values.stress import AgentKeys, Provoke, StepData, Stress
from harness.errors import ConfigError
from harness.scenarios.load import load_scenario
from harness.scenarios.repro import Verdict, judge, program, run_agent
from harness.scenarios.text import ScenarioText, scenario_text
from harness.scenarios.types import Step

Expect = Mapping[str, str | int | bool]
#: The mutation campaign's case that runs the whole plan (`harness.agent.values.info.Mutant`).
STRESS_CASE = "stress"
#: What a case's failed expectation counts as among a run's failed oracles.
STRESS_ORACLE = "STRESS"
#: A drop cause's case is named by this and the counter it provokes: ``cause-dc_recurevt``.
CAUSE_PREFIX = "cause-"
#: The fill's records past capacity on CPU c, in granules: ``EXTRA[c % 3]``.
EXTRA = (1, 2, 3)
#: The reader and restart cases: busy loops this long on every CPU, the PMU producing.
BUSY_MS = 1500
#: The restart case stops and starts this long after the loops began, and again after.
RESTART_AFTER_MS = 300
#: What a case expects beside its numbers: the shared interrupt count balances.
CALLS: Expect = {"oracle": "CALLS"}
#: The expectation that the PMU's own producer calls were read: a reader saw records.
READ_SOME: Expect = {"value": "samples", "at_least": 1}


@dataclass(frozen=True, slots=True)
class StressCase:
    """One case of the plan: its name, its scenario's name and its file's text."""

    name: str
    file: str
    text: str


@dataclass(frozen=True, slots=True)
class StressPlan:
    """A flavour's cases, and each case it could not be given with why."""

    flavour: str
    cases: tuple[StressCase, ...]
    missing: tuple[tuple[str, str], ...]  # (case, why it is not in the plan)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case run: its expectations' verdicts and the flavour's violations."""

    case: StressCase
    run: AgentRun
    verdicts: tuple[Verdict, ...]
    violations: tuple[Violation, ...]
    scenario: Path
    numbers: int  # the expectations that compare a number of the run

    def unmet(self) -> list[Violation]:
        """Each expectation that did not hold, as a violation of `STRESS_ORACLE`."""
        return [Violation(STRESS_ORACLE, None, v.expectation, v.observed, self.case.file)
                for v in self.verdicts if not v.held]  # fmt: skip

    def judged(self) -> tuple[Judged, ...]:
        """What `STRESS_ORACLE` compared here: the case's numbers against the plan's.

        Empty for a case that expects no number (``exact``, judged by the flavour's own).
        """
        what = f"counters of {self.case.file} against the plan's"
        return (Judged(STRESS_ORACLE, self.numbers, what),) if self.numbers else ()

    def failures(self) -> list[str]:
        """One line per expectation that did not hold and per violation of the flavour's."""
        return [str(v) for v in (*self.unmet(), *self.violations)]


def case_names(stress: Stress | None) -> tuple[str, ...]:
    """Every case the plan has for a flavour declaring ``stress``, in order."""
    if stress is None:
        return ()
    causes = tuple(f"{CAUSE_PREFIX}{p.counter}" for p in stress.provoke)
    return ("fill", *causes, "reader", "restart", "exact")


def stress_plan(flavour: str, stress: Stress | None, topology: str, cpus: int) -> StressPlan:
    """The cases for ``flavour`` on ``topology`` (``cpus`` CPUs); pure.

    :raise ConfigError: the declaration names a counter twice or a cause it does not list.
    """
    if stress is None:
        return StressPlan(flavour, (), (("every case", f"{flavour} declares no stress plan"),))
    _check(stress)
    head = _Head(flavour, topology, cpus)
    cases = [_fill(head, stress), *(_provoked(head, stress, p) for p in stress.provoke)]
    missing = [(f"{CAUSE_PREFIX}{c}", why) for c, why in stress.unprovoked.items()]
    if stress.reader is None:
        missing.append(("reader", f"{flavour} declares no reader concurrent with its producers"))
    else:
        cases.append(_busy(head, "reader", stress.reader_agent, stress.reader, ()))
    if stress.restart is None:
        missing.append(("restart", f"{flavour} declares no steps that stop and start it"))
    else:
        cases.append(_busy(head, "restart", stress.reader_agent, (), stress.restart))
    cases.append(head.case("exact", "its own exact run", {}, (), (CALLS,), run="exact"))
    return StressPlan(flavour, tuple(cases), tuple(missing))


def _check(stress: Stress) -> None:
    provoked = [p.counter for p in stress.provoke]
    named = [stress.full, *provoked, *stress.unprovoked]
    unknown = sorted(set(named) - set(stress.causes))
    if unknown:
        raise ConfigError(f"stress: {', '.join(unknown)} not among its causes")
    if len(set(named)) != len(named):
        raise ConfigError("stress: a cause is the full one, provoked or unprovoked at most once")


@dataclass(frozen=True, slots=True)
class _Head:
    flavour: str
    topology: str
    cpus: int

    def steps(self, data: Sequence[StepData]) -> tuple[Step, ...]:
        """``data`` as steps, a ``"cpu": "each"`` step once per CPU."""
        out: list[Step] = []
        for item in data:
            cpus = range(self.cpus) if item.get("cpu") == "each" else (item.get("cpu"),)
            out += [_step({**item, "cpu": cpu} if cpu is not None else item) for cpu in cpus]
        return tuple(out)

    def case(self, name: str, what: str, agent: AgentKeys, steps: Sequence[StepData],
             expect: Sequence[Expect], run: str | None = None) -> StressCase:  # fmt: skip
        file = f"stress-{self.flavour}-{name}".lower().replace("_", "-")
        parts = ScenarioText(
            name=file,
            description=f"The shared stress plan, {self.flavour}: {what}.",
            seed=1,
            topology=self.topology,
            agent={"flavour": self.flavour, **agent},
            steps=self.steps(steps),
            expect=tuple(expect),
            extra={"run": run} if run else {},
        )
        return StressCase(name, file, scenario_text(parts))


def _step(item: Mapping[str, object]) -> Step:
    fields = {key: item[key] for key in ("cpu", "count", "ms", "on") if key in item}
    return Step(op=str(item["op"]), **fields)  # type: ignore[arg-type]


def _fill(head: _Head, stress: Stress) -> StressCase:
    extra = [stress.granule * EXTRA[cpu % len(EXTRA)] for cpu in range(head.cpus)]
    kept = [stress.capacity if cpu == 0 or not stress.global_buffer else 0
            for cpu in range(head.cpus)]  # fmt: skip
    bursts: list[StepData] = [{"op": stress.inject_op, "cpu": cpu,
                               "count": kept[cpu] + extra[cpu] + stress.spill}
              for cpu in range(head.cpus)]  # fmt: skip
    others = [c for c in stress.causes if c != stress.full]
    if stress.global_buffer:
        expect: list[Expect] = [_equals(f"stats.{stress.full}", sum(extra))]
        expect += [_equals(f"stats.{cause}", 0) for cause in others]
        what = f"CPU 0 fills the shared buffer ({stress.capacity} records), every CPU adds more"
    else:
        expect = []
        for cpu in range(head.cpus):
            expect.append(_equals(f"percpu.{cpu}.{stress.full}", extra[cpu]))
            if stress.recorded is not None:
                expect.append(_equals(f"percpu.{cpu}.{stress.recorded}", stress.capacity))
            expect += [_equals(f"percpu.{cpu}.{cause}", 0) for cause in others]
        what = f"each CPU's buffer ({stress.capacity} records) filled past capacity"
    steps = (*stress.setup, *bursts, *stress.flush)
    return head.case("fill", what, stress.agent, steps, (*expect, CALLS))


def _provoked(head: _Head, stress: Stress, provoke: Provoke) -> StressCase:
    expect: list[Expect] = []
    for cpu in range(head.cpus):
        for cause in stress.causes:
            want = provoke.count if cause == provoke.counter else provoke.others.get(cause, 0)
            expect.append(_equals(f"percpu.{cpu}.{cause}", want if cpu == 0 else 0))
    what = f"{provoke.counter} alone on CPU 0" + (f" ({provoke.why})" if provoke.why else "")
    agent = {**stress.agent, **provoke.agent}
    steps = (*stress.setup, *provoke.steps)
    return head.case(f"{CAUSE_PREFIX}{provoke.counter}", what, agent, steps, (*expect, CALLS))


def _busy(head: _Head, name: str, agent: AgentKeys, first: Sequence[StepData],
          middle: Sequence[StepData]) -> StressCase:  # fmt: skip
    spins: list[StepData] = [{"op": "spin", "cpu": cpu, "ms": BUSY_MS} for cpu in range(head.cpus)]
    if middle:
        middle = ({"op": "idle", "ms": RESTART_AFTER_MS}, *middle,
                  {"op": "idle", "ms": RESTART_AFTER_MS})  # fmt: skip
    what = ("a reader runs all through busy loops on every CPU" if name == "reader"
            else "stopped and started while busy loops run on every CPU")  # fmt: skip
    steps = (*first, *spins, *middle, {"op": "wait"})
    return head.case(name, what, agent, steps, (READ_SOME, CALLS))


def _equals(value: str, count: int) -> Expect:
    return {"value": value, "equals": count}


def run_case(agent: AgentLike, case: StressCase, out: Path) -> CaseResult:
    """Write ``case`` into ``out``, load it as any scenario, run it, judge it.

    Blocks for the run (seconds). The run's flavour is the one the case names.

    :raise ConfigError: the case's file does not load (a declaration the format refuses).
    :raise HarnessError: the run failed (`run_agent`).
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{case.file}.toml"
    path.write_text(case.text)
    scenario = load_scenario(path)
    flavour = behaviour(scenario.agent.flavour)
    run = run_agent(scenario, agent, program(scenario, _no_host_action, _no_nmi))
    verdicts = judge(scenario.expect, run, flavour)
    numbers = sum(1 for item in scenario.expect if item.value is not None)
    return CaseResult(case, run, verdicts, tuple(flavour.check(run)), path, numbers)


def _no_host_action(ms: int) -> None:
    raise ConfigError(f"the stress plan has no host action (pause {ms} ms)")


def _no_nmi() -> None:
    raise ConfigError("the stress plan has no host action (inject-nmi)")


def run_plan(agent: AgentLike, flavour: str, topology: str, cpus: int, out: Path,
             ) -> list[CaseResult]:  # fmt: skip
    """Every case of ``flavour``'s plan in turn, each written into ``out``; their results.

    :raise HarnessError: a case's run failed (`run_case`).
    """
    plan = stress_plan(flavour, behaviour(flavour).stress, topology, cpus)
    return [run_case(agent, case, out) for case in plan.cases]
