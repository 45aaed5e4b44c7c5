"""What a flavour is to the rest of the harness: one value of data and callables.

The core, the scenario runner, the matrix and the CLI use a flavour only through
`Flavour`; each flavour builds its own in ``harness/agent/flavours/<name>/flavour.py``
and the registry (`harness.agent.flavours`) lists it in one line::

    fl = behaviour("dt")
    run = fl.standard_run(agent, AgentSpec(flavour="dt"), cpus=(0, 1))
    violations = fl.check(run)
    print(fl.report(run, violations))          # per-CPU table and one verdict per oracle
    unjudged(fl.judged(run), ("WHERE",))       # [] when WHERE compared something
    run.numbers()["stats.dropevt"]             # every counter under one flat name

How a flavour is judged and shown (check, judged, applicable, report, matrix rows) is
its declaration (`harness.agent.judging.Judging`: its own laws, when each applies,
its per-CPU counters and columns) composed once by `harness.agent.judging.compose`.

Runners take the agent as `AgentLike` (what `harness.agent.driver.Agent` offers),
so a flavour's package never imports the driver; `AgentLike`, `AgentRun` and `narrow`
live in `harness.agent.runner`, below the peer, and are named here too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from harness.agent import flavours
from harness.agent.judging import Judges, ReportedRun, run_report
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.report import CellRow
from harness.agent.runner import AgentLike, AgentRun, narrow
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import Judged, Violation
from harness.agent.values.stress import RacePair, Stress
from harness.errors import FlavourPackageError
from harness.timing import ANALYSIS, timed

__all__ = [
    "AgentLike", "AgentRun", "BenchRow", "Flavour", "FlavourBench", "Judges", "OpRule",
    "ReportedRun", "Script", "behaviour", "narrow", "run_report", "typed",
]  # fmt: skip

_R = TypeVar("_R")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class OpRule:
    """The keys a scenario op takes besides ``op``; None: the key is not allowed.

    ``cpu``: one CPU, one or ``all``, or a CPU that can go offline (not 0).
    """

    cpu: Literal["one", "one-or-all", "hotplug"] | None = None
    cpu_default: Literal["all"] | None = None  # None: cpu is required
    count_max: int | None = None
    ms_max: int | None = None
    on: bool = False

    def keys(self) -> tuple[str, ...]:
        """The keys this op takes."""
        taken = (("cpu", self.cpu), ("count", self.count_max), ("ms", self.ms_max))
        return (*(k for k, rule in taken if rule is not None), *(("on",) if self.on else ()))


@dataclass(frozen=True, slots=True)
class Script:
    """A scenario's steps, translated: what the guest runs and what it amounts to.

    ``body`` runs between the flavour's start and collect steps; ``injected`` is
    CPU → producer calls injected; ``op_counts`` is op → CPU → count for the
    flavour's own counting ops (dt: ``nest``, ``skip``); ``switches`` the last value
    of each of its on/off ops (dt: ``reader``); ``kicks`` counts whole-machine
    drains (None: not countable).
    """

    body: tuple[str, ...]
    actions: Mapping[str, Callable[[], None]] = field(default_factory=dict)
    injected: Mapping[int, int] = field(default_factory=dict)
    op_counts: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    switches: Mapping[str, bool] = field(default_factory=dict)
    kicks: int | None = None
    throttling_disabled: bool = True
    max_sample_rate: int | None = None
    #: The guest's clocks count instructions (input-free runs: ``-icount shift=0``), so one
    #: guest nanosecond is one retired instruction and a time budget counts instructions.
    instruction_clock: bool = False

    def injected_by(self, *ops: str) -> dict[int, int]:
        """CPU → producer calls: ``inject``'s, and those of the flavour's own counting ``ops``.

        For an op whose count is producer calls like ``inject``'s (``inject-task``).
        """
        counted = (self.injected, *(self.op_counts.get(op, {}) for op in ops))
        return {cpu: sum(c.get(cpu, 0) for c in counted) for cpu in set[int]().union(*counted)}


#: One line of ``invoke bench``'s table: measurement, value (or median), min, max.
BenchRow = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class FlavourBench:
    """A flavour's own part of ``invoke bench`` (`harness.cli.agentbench` calls it).

    ``measure(agent, cpus)`` runs in the bench's guest with the module deployed and
    returns what the bench JSON keeps under the flavour's name (numbers only: never
    asserted); ``rows(result)`` turns that back into lines of the table.
    """

    measure: Callable[[AgentLike, tuple[int, ...]], dict[str, Any]]
    rows: Callable[[Mapping[str, Any]], list[BenchRow]]


@dataclass(frozen=True, slots=True)
class Flavour:
    """One flavour's behaviour: how it runs, how it is judged, how it is shown.

    ``ops`` are the scenario ops only this flavour has, with their keys; each
    counting one maps in ``op_steps`` to the profctl step it becomes (``(cpu,
    count) -> step``, or a tuple of steps), the others are switches (``on``). ``refused_ops`` maps
    shared ops it cannot run to the reason.
    """

    info: FlavourInfo
    #: How it is judged and shown: its declaration composed (`harness.agent.judging.compose`).
    judges: Judges
    standard_run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]
    #: Exact counts: overflows only carry injected bursts, drained by hand where the
    #: flavour can be; every number the oracles judge is then predictable.
    exact_run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]
    run_script: Callable[[AgentLike, AgentSpec, Script], AgentRun]
    ops: Mapping[str, OpRule] = field(default_factory=dict)
    op_steps: Mapping[str, Callable[[int, int], str | tuple[str, ...]]] = field(
        default_factory=dict
    )
    refused_ops: Mapping[str, str] = field(default_factory=dict)
    #: The standard run with Linux perf sampling beside the agent (oracle PEER);
    #: None: the flavour has none.
    peer_run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun] | None = None
    #: Further runs by name (hwpmc: ``counting``), each the case of the mutants whose
    #: ``case`` names it.
    extra_runs: Mapping[str, Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]] = field(
        default_factory=dict
    )
    #: Its own measurements in ``invoke bench``; None: it has none beyond the shared ones.
    bench: FlavourBench | None = None
    #: A scenario judged input-free, where time budgets count instructions: the case of its
    #: ``deterministic`` mutants (`harness.mutation.groups`); None: it has none.
    budget_scenario: Path | None = None
    #: Its part of the shared stress plan (`harness.scenarios.stress`); None: it declared
    #: none, and the plan's every case is UNJUDGED for it, saying so.
    stress: Stress | None = None
    #: The variables its producers write and the overlap watch's spinners read, besides the
    #: core's (`harness.agent.overlap.pair_covers`); each must be met, else UNJUDGED.
    race_pairs: tuple[RacePair, ...] = ()

    @property
    def name(self) -> str:
        """The flavour's name (``tprof``, ``dt``)."""
        return self.info.name

    @property
    def oracles(self) -> tuple[tuple[str, str], ...]:
        """Its oracles, (name, what it checks), in report order."""
        return self.judges.oracles

    def check(self, run: AgentRun) -> list[Violation]:
        """Every violation of every oracle that applies to ``run``."""
        return self.judges.check(run)

    def judged(self, run: AgentRun) -> tuple[Judged, ...]:
        """What each applicable oracle compared in ``run`` (`Judges.judged`)."""
        return self.judges.judged(run)

    def applicable(self, run: AgentRun) -> frozenset[str]:
        """The oracles `check` judges for ``run``."""
        return self.judges.applicable(run)

    def report(self, run: AgentRun, violations: Sequence[Violation]) -> str:
        """Its per-CPU table, perf beside it, one verdict per oracle, the content."""
        return self.judges.report(run, violations)

    def cell_rows(self, run: AgentRun) -> list[CellRow]:
        """One row per CPU, for the matrix report."""
        return self.judges.cell_rows(run)

    @property
    def oracle_names(self) -> tuple[str, ...]:
        """The names of its oracles, in report order."""
        return tuple(name for name, _ in self.oracles)

    @property
    def runs(self) -> dict[str, Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]]:
        """Its whole-module runs by name: ``standard``, ``exact`` and its ``extra_runs``.

        A mutant's ``case`` and a scenario's ``run`` name one of them.
        """
        return {"standard": self.standard_run, "exact": self.exact_run, **self.extra_runs}


def behaviour(name: str) -> Flavour:
    """The behaviour of the flavour called ``name`` (its runner, oracles, report).

    Imported on first use from its package's ``flavour`` module:
    ``harness.agent.flavours.<name>.flavour`` in the tree, ``<package>.flavour`` outside
    (`harness.agent.flavours.package`).

    :raise ConfigError: no such flavour.
    :raise FlavourPackageError: its ``flavour.py`` does not import, has no ``FLAVOUR``
        that is a `Flavour`, or that flavour's data is not its ``data.py``'s ``INFO``.
    """
    found = flavours.package(name)
    try:
        module = importlib.import_module(f"{found.package}.flavour")
    except Exception as exc:  # the package's own code: whatever it raises is its problem
        if not found.outside:
            raise
        problem = f"flavour.py does not import: {type(exc).__name__}: {exc}"
        raise FlavourPackageError(found.package, found.origin, problem) from exc
    value = getattr(module, "FLAVOUR", None)
    if not isinstance(value, Flavour):
        what = "no FLAVOUR" if value is None else f"a FLAVOUR that is a {type(value).__name__}"
        problem = f"flavour.py has {what}, not a harness.agent.flavour.Flavour"
        raise FlavourPackageError(found.package, found.origin, problem)
    if found.outside and value.info != found.info:
        problem = f"flavour.py's FLAVOUR.info is not data.py's INFO (it names {value.info.name!r})"
        raise FlavourPackageError(found.package, found.origin, problem)
    return value


def typed(kind: type[_R], judge: Callable[[_R], _T]) -> Callable[[AgentRun], _T]:
    """``judge`` of a flavour's own run type, as the shared machinery calls it.

    Its time counts as host analysis (`harness.timing`).
    """

    @timed(ANALYSIS)
    def judged(run: AgentRun) -> _T:
        return judge(narrow(run, kind))

    return judged
