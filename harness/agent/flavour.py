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

Runners take the agent as `AgentLike` (what `harness.agent.driver.Agent` offers),
so a flavour's package never imports the driver.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from harness.agent import flavours, profctl
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content import content_report
from harness.agent.oracles.content_view import ContentView
from harness.agent.oracles.report import CellRow
from harness.agent.peer.counts import PeerEvidence
from harness.agent.peer.profile import profile_report
from harness.agent.truth.elfsyms import FunctionTable
from harness.agent.truth.nmigraph import NmiGraph
from harness.agent.truth.program import TruthImage
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import Judged, Violation
from harness.errors import FlavourPackageError
from harness.timeouts import Timeouts
from harness.timing import ANALYSIS, timed
from harness.vm.shell import CommandShell

_R = TypeVar("_R")
_T = TypeVar("_T")


class AgentLike(Protocol):
    """The agent in one guest, as a flavour's runner uses it (`harness.agent.driver.Agent`)."""

    @property
    def workdir(self) -> Path:
        """Where a run's evidence is kept on the host."""

    @property
    def shell(self) -> CommandShell:
        """The guest's shell, for tools that run beside the agent (the perf peer)."""

    @property
    def timeouts(self) -> Timeouts:
        """The run's (scaled) time budgets."""

    def load(
        self,
        spec: AgentSpec,
        *,
        throttling_disabled: bool = True,
        max_sample_rate: int | None = None,
        burst_wait_ms: int | None = None,
    ) -> None:
        """Load the module with ``spec``'s parameters, the perf core's throttling as told."""

    def set_throttling(self, *, disabled: bool, max_sample_rate: int | None = None) -> None:
        """Switch the perf core's interrupt throttling off or on (nothing if it already is)."""

    def online_cpus(self) -> tuple[int, ...]:
        """CPUs online in the guest now."""

    def run_steps(
        self,
        steps: Sequence[str],
        *,
        actions: Mapping[str, Callable[[], None]] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[profctl.StepResult, ...]:
        """Run ``steps`` in one profctl process (the host acting at marked points)."""

    @property
    def pmu_irq_label(self) -> str:
        """How the guest's ``/proc/interrupts`` names the PMU overflow interrupt."""

    @property
    def run_count(self) -> int:
        """Profctl sequences run so far (names the files a run keeps)."""

    def fetch(self, remote: str, name: str) -> bytes:
        """Copy guest file ``remote`` into the workdir as ``name``; its bytes."""

    def decode(self, layout: str, data: bytes) -> list[dict[str, int]]:
        """Records of ``layout`` (a C struct name) in ``data``, by the rendered decoder."""

    def decode_framed(self, data: bytes) -> tuple[list[dict[str, object]], int]:
        """Whole varint-framed records in ``data`` and the bytes they took (rendered decoder)."""

    def nmi_expected_for(self, spec: AgentSpec) -> bool:
        """Whether overflows arrive as NMIs for ``spec``."""

    def events_per_ns(self, spec: AgentSpec) -> float | None:
        """Events the PMU counts per enabled nanosecond for ``spec``, if fixed."""

    def save_run(self, record: Mapping[str, object]) -> Path:
        """Write one run's record as JSON into the workdir; its path."""

    def truth_image(self) -> TruthImage:
        """The ground-truth workload's functions and profctl's text (`harness.agent.truth`)."""

    def spin_loop(self) -> tuple[int, int]:
        """Where profctl's busy loop runs once pinned: ``spin_loop``'s link addresses."""

    def module_functions(self) -> FunctionTable:
        """The loaded module's functions at their kernel addresses (``/proc/kallsyms``)."""

    def kallsyms_functions(self, names: Sequence[str]) -> FunctionTable:
        """Core kernel functions by name at their addresses (``/proc/kallsyms``)."""

    def kernel_functions(self) -> FunctionTable | None:
        """The guest kernel's functions from its vmlinux (None: not known)."""

    def nmi_graph(self, flavour: str) -> NmiGraph:
        """What the built module's NMI entry reaches for a run of ``flavour`` (C-2)."""

    def kernel_sanitizers(self) -> tuple[str, ...]:
        """The sanitizers the guest kernel was built with (``CONFIG_KASAN``, ...)."""


class AgentRun(Protocol):
    """One run of any flavour, as the shared machinery reads it."""

    @property
    def spec(self) -> AgentSpec:
        """The spec the module was loaded with."""

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name, as scenario values name them.

        ``stats.x``, ``percpu.<cpu>.x``, ``core.<cpu>.x``, ``samples``, ``samples.cpu.<cpu>``.
        """

    def records(self) -> Sequence[object]:
        """The decoded records the run read (dataclasses with slots), in stream order."""


class ReportedRun(Protocol):
    """What `run_report` reads of a flavour's run besides its own table and verdicts."""

    @property
    def peer(self) -> PeerEvidence | None:
        """Linux perf beside the agent (None: no peer ran)."""

    def content(self) -> ContentView:
        """The run's samples and ground truth, as the content oracles judge them."""


def run_report(run: ReportedRun, table: str, verdicts: str, violations: Sequence[Violation]) -> str:
    """A flavour's report: its per-CPU ``table``, perf beside it, its ``verdicts``, content.

    Every flavour's `Flavour.report` is this, with its own table and verdict lines.
    """
    content = content_report(run.content(), violations)
    return f"{table}\n{profile_report(run.peer)}{verdicts}\n{content}"


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
    #: guest nanosecond is one retired instruction and a time budget is exact.
    instruction_clock: bool = False


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
    count) -> step``), the others are switches (``on``). ``refused_ops`` maps
    shared ops it cannot run to the reason.
    """

    info: FlavourInfo
    oracles: tuple[tuple[str, str], ...]  # (name, what it checks), report order
    check: Callable[[AgentRun], list[Violation]]
    #: What each applicable oracle compared (its table's and the content oracles'): a
    #: ``PASS`` needs n > 0; n = 0 is ``UNJUDGED`` (`harness.agent.oracles.report.unjudged`).
    judged: Callable[[AgentRun], tuple[Judged, ...]]
    applicable: Callable[[AgentRun], frozenset[str]]  # the oracles `check` judges for a run
    report: Callable[[AgentRun, Sequence[Violation]], str]
    standard_run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]
    #: Exact counts: overflows only carry injected bursts, drained by hand where the
    #: flavour can be; every number the oracles judge is then predictable.
    exact_run: Callable[[AgentLike, AgentSpec, tuple[int, ...]], AgentRun]
    run_script: Callable[[AgentLike, AgentSpec, Script], AgentRun]
    cell_rows: Callable[[AgentRun], list[CellRow]]  # one per CPU, for the matrix report
    ops: Mapping[str, OpRule] = field(default_factory=dict)
    op_steps: Mapping[str, Callable[[int, int], str]] = field(default_factory=dict)
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
    #: A scenario judged input-free, where time budgets are exact: the case of its
    #: ``deterministic`` mutants (`harness.cli.mutantruns`); None: it has none.
    budget_scenario: Path | None = None

    @property
    def name(self) -> str:
        """The flavour's name (``tprof``, ``dt``)."""
        return self.info.name

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


def narrow(run: AgentRun, kind: type[_R]) -> _R:
    """``run`` as the flavour's own run type ``kind``.

    :raise TypeError: another flavour's run was handed over.
    """
    if not isinstance(run, kind):
        raise TypeError(f"expected a {kind.__name__}, got a {type(run).__name__}")
    return run
