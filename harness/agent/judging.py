"""How every flavour is judged and shown: declared by the flavour, composed here once.

A flavour declares what differs, as data: its own laws (`Laws`: its table after the
shared oracles, a check for each, when each applies, what each compared), how its run
gives the core's counters and its own per-CPU ones, its matrix columns, and its table
(a function, or columns of its per-CPU counters that `counter_table` renders).
`compose` turns that into what `harness.agent.flavour.Flavour` calls: ``check``,
``judged``, ``applicable``, ``report`` and ``cell_rows``, the shared core oracles,
the content oracles and the flavour's own together::

    LAWS = Laws(name="skel", oracles=OWN, checks={"SKEL-O1": check_conservation},
                compared=compared, core=lambda run: core_view_of(run, run.core))
    JUDGING = Judging(kind=SkelRun, laws=LAWS, percpu=..., recorded="x_recorded",
                      drops=(("full", "x_drop_full"),), columns=COLUMNS)
    judges = compose(JUDGING, INFO)
    judges.check(run)                 # [] when every applicable oracle holds
    print(judges.report(run, judges.check(run)))

The peer run's defaults live here too (`content_samples`, `info_peer_window`): a
flavour's records as the content oracles see them, and the window its ``info`` gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content import check_content, content_report, judge_content
from harness.agent.oracles.content_view import ContentView, applicable_content, oracles_for
from harness.agent.oracles.core import (
    CORE_ORACLES,
    CoreView,
    applicable_core,
    check_core,
    judge_flavour,
)
from harness.agent.oracles.evidence import KernelEvidence
from harness.agent.oracles.report import (
    CellRow,
    decimal,
    delivered_percent,
    format_cpus,
    known_sum,
    nmi_percent,
    verdict_lines,
)
from harness.agent.peer.counts import PeerEvidence, PeerWindow, info_window
from harness.agent.peer.profile import profile_report
from harness.agent.runner import AgentRun, narrow
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import AgentCounters, Judged, Violation
from harness.agent.values.samples import Sample
from harness.agent.values.table import align
from harness.errors import ConfigError
from harness.timing import ANALYSIS, timed

__all__ = [
    "JudgedRun",
    "Judges",
    "Judging",
    "Laws",
    "ReportedRun",
    "compose",
    "content_samples",
    "counter_table",
    "info_peer_window",
    "run_report",
]  # fmt: skip

#: CPU → counter name → value: the core's ``nmi`` file, or a flavour's per-CPU counters.
PerCpu = Mapping[int, Mapping[str, int]]


class ReportedRun(Protocol):
    """What `run_report` reads of a flavour's run besides its own table and verdicts."""

    @property
    def peer(self) -> PeerEvidence | None:
        """Linux perf beside the agent (None: no peer ran)."""

    def content(self) -> ContentView:
        """The run's samples and ground truth, as the content oracles judge them."""


class JudgedRun(ReportedRun, Protocol):
    """What the composed judging reads of any flavour's run (`RunEvidence` has it)."""

    @property
    def spec(self) -> AgentSpec:
        """The module's spec for the run."""

    @property
    def kernel(self) -> KernelEvidence | None:
        """PMU interrupts the guest kernel counted around the run (None: not read)."""


_R = TypeVar("_R", bound=JudgedRun)


def run_report(run: ReportedRun, table: str, verdicts: str, violations: Sequence[Violation]) -> str:
    """A flavour's report: its per-CPU ``table``, perf beside it, its ``verdicts``, content."""
    content = content_report(run.content(), violations)
    return f"{table}\n{profile_report(run.peer)}{verdicts}\n{content}"


def _always(run: object) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Laws(Generic[_R]):
    """A flavour's own oracles, judged after the shared ones (`CORE_ORACLES`).

    ``oracles``: its own (name, what it checks), in report order; ``checks``: the
    check of each law that has one (a law without one is judged elsewhere: a PASS
    then needs its count); ``applies``: when a law applies to a run (absent: always);
    ``compared``: what each law compared (one `Judged` a law, n counting events);
    ``core``: what the shared oracles read of a run.
    """

    name: str
    oracles: tuple[tuple[str, str], ...]
    checks: Mapping[str, Callable[[_R], list[Violation]]]
    compared: Callable[[_R], Iterable[Judged]]
    core: Callable[[_R], CoreView]
    applies: Mapping[str, Callable[[_R], bool]] = field(default_factory=dict)

    @property
    def table(self) -> tuple[tuple[str, str], ...]:
        """Every oracle of its table, the shared ones first, in report order."""
        return (*CORE_ORACLES, *self.oracles)

    def applicable(self, run: _R) -> frozenset[str]:
        """The oracles `check` judges for ``run``: the shared ones that apply, and its own."""
        own = {name for name, _ in self.oracles if self.applies.get(name, _always)(run)}
        return applicable_core(self.core(run)) | own

    def check(self, run: _R) -> list[Violation]:
        """Every violation of every applicable oracle of its table, the shared ones first.

        :raise ConfigError: the run is another flavour's (these are this flavour's laws).
        """
        if run.spec.flavour != self.name:
            raise ConfigError(f"{self.name}'s oracles judge {self.name}'s runs; the run's "
                              f"flavour is {run.spec.flavour!r}")  # fmt: skip
        applicable = self.applicable(run)
        own = [v for name, _ in self.oracles if name in applicable and name in self.checks
               for v in self.checks[name](run)]  # fmt: skip
        return [*check_core(self.core(run)), *own]

    def judge(self, run: _R) -> list[Judged]:
        """What each applicable oracle of its table compared (`judge_flavour`)."""
        return judge_flavour(self.core(run), self.applicable(run), self.compared(run))

    def verdicts(self, run: _R, violations: Sequence[Violation]) -> str:
        """One ``PASS (n=...)``/``FAIL``/``UNJUDGED``/``skip`` line per oracle of its table."""
        return verdict_lines(violations, self.table, self.applicable(run), judged=self.judge(run))


@dataclass(frozen=True, slots=True)
class Judging(Generic[_R]):
    """What a flavour declares of its judging and its views; `compose` does the rest.

    ``kind``: its run type; ``percpu``: its own per-CPU counters in a run;
    ``recorded`` and ``drops`` ((title, counter) each) its matrix columns; ``table``
    its report's table, or None: `counter_table` of ``columns`` ((title, per-CPU
    counter) after the core's), ``header`` (None: its spec's event, period and
    parameters) and ``footer`` (a last line, or none).
    """

    kind: type[_R]
    laws: Laws[_R]
    percpu: Callable[[_R], PerCpu]
    recorded: str
    drops: tuple[tuple[str, str], ...]
    table: Callable[[_R], str] | None = None
    columns: tuple[tuple[str, str], ...] = ()
    header: Callable[[_R], str] | None = None
    footer: Callable[[_R], str] | None = None


@dataclass(frozen=True, slots=True)
class Judges:
    """A flavour's judging and views as the shared machinery calls them (`compose`)."""

    #: Its whole table (the shared oracles, its own, then the content oracles), report order.
    oracles: tuple[tuple[str, str], ...]
    check: Callable[[AgentRun], list[Violation]]
    #: What each applicable oracle compared (its table's and the content oracles'): a
    #: ``PASS`` needs n > 0; n = 0 is ``UNJUDGED`` (`harness.agent.oracles.report.unjudged`).
    judged: Callable[[AgentRun], tuple[Judged, ...]]
    applicable: Callable[[AgentRun], frozenset[str]]  # the oracles `check` judges for a run
    report: Callable[[AgentRun, Sequence[Violation]], str]
    cell_rows: Callable[[AgentRun], list[CellRow]]  # one per CPU, for the matrix report


def compose(judging: Judging[_R], info: FlavourInfo) -> Judges:
    """``judging`` composed with the shared and content oracles: what `Flavour` calls.

    ``check``, ``judged``, ``applicable`` and ``report`` count as host analysis
    (`harness.timing`).

    :raise ConfigError: a declared column names no per-CPU counter of ``info``.
    """
    laws, kind = judging.laws, judging.kind
    named = {judging.recorded, *(name for _, name in (*judging.drops, *judging.columns))}
    if unknown := sorted(named - set(info.percpu_names)):
        raise ConfigError(f"{info.name}'s judging names counters its data does not declare "
                          f"per CPU: {', '.join(unknown)}")  # fmt: skip

    @timed(ANALYSIS)
    def check(run: AgentRun) -> list[Violation]:
        own = narrow(run, kind)
        return laws.check(own) + check_content(own.content())

    @timed(ANALYSIS)
    def judged(run: AgentRun) -> tuple[Judged, ...]:
        own = narrow(run, kind)
        return (*laws.judge(own), *judge_content(own.content()))

    @timed(ANALYSIS)
    def applicable(run: AgentRun) -> frozenset[str]:
        own = narrow(run, kind)
        return laws.applicable(own) | applicable_content(own.content())

    @timed(ANALYSIS)
    def report(run: AgentRun, violations: Sequence[Violation]) -> str:
        own = narrow(run, kind)
        table = judging.table(own) if judging.table else _declared_table(judging, info, own)
        return run_report(own, table, laws.verdicts(own, violations), violations)

    def cell_rows(run: AgentRun) -> list[CellRow]:
        own = narrow(run, kind)
        view, percpu = laws.core(own), judging.percpu(own)
        rows = []
        for cpu in sorted({*view.core, *percpu}):
            counters = percpu.get(cpu, {})
            drops = {title: counters.get(name, 0) for title, name in judging.drops}
            irq = view.kernel.delta(cpu) if view.kernel else None
            rows.append(CellRow.from_core(cpu, view.core.get(cpu, {}), irq=irq, drops=drops,
                                          recorded=counters.get(judging.recorded, 0)))  # fmt: skip
        return rows

    oracles = (*laws.table, *oracles_for(info))
    return Judges(oracles, check, judged, applicable, report, cell_rows)


def _declared_table(judging: Judging[_R], info: FlavourInfo, run: _R) -> str:
    view = judging.laws.core(run)
    spec = run.spec
    params = "".join(f", {p.name} {spec.param(p.name)}" for p in info.params)
    header = judging.header(run) if judging.header else (
        f"{info.name}: event {spec.event}, period {spec.period}{params}, "
        f"CPUs {format_cpus(view.core)}")  # fmt: skip
    table = counter_table(view.core, judging.percpu(run), judging.columns, view.kernel)
    return "\n".join([header, *table, *([judging.footer(run)] if judging.footer else [])])


def counter_table(
    core: PerCpu, percpu: PerCpu, columns: Sequence[tuple[str, str]], kernel: KernelEvidence | None
) -> list[str]:
    """Per-CPU table lines: ``irq``, ``seen``, ``calls``, the ``columns``, ``nmi%``, ``deliv%``.

    One row per CPU of ``core``, then ``all``. ``irq`` is the guest kernel's count of
    PMU interrupts (``-``: not read), ``seen`` and ``calls`` the core's overflows and
    producer calls, each column (title, counter) a sum of ``percpu``'s counter.
    """
    titles = ("cpu", "irq", "seen", "calls", *(title for title, _ in columns), "nmi%", "deliv%")

    def row(cpus: Sequence[int], label: str) -> tuple[str, ...]:
        def total(counters: PerCpu, name: str) -> int:
            return sum(counters.get(c, {}).get(name, 0) for c in cpus)

        irq = known_sum(kernel.delta(c) if kernel else None for c in cpus)
        seen = total(core, "x_nmi_total")
        return (label, "-" if irq is None else str(irq), str(seen),
                str(total(core, "x_producer_calls")),
                *(str(total(percpu, name)) for _, name in columns),
                decimal(nmi_percent(total(core, "x_nmi_ctx_ok"), seen)),
                decimal(delivered_percent(seen, total(core, "x_periods_undelivered"))))  # fmt: skip

    cpus = sorted(core)
    return align([titles, *(row((cpu,), str(cpu)) for cpu in cpus), row(cpus, "all")])


class _Counted(Protocol):
    """A run that carries the agent's debugfs counters (every in-tree run type does)."""

    @property
    def counters(self) -> AgentCounters:
        """The agent's counters after the run."""


def content_samples(run: ReportedRun) -> tuple[Sample, ...]:
    """A run's records as samples, as the content oracles see them (a peer run's default)."""
    return run.content().samples


def info_peer_window(run: _Counted, period: int) -> PeerWindow:
    """Where each CPU's agent event counted, from the run's own ``info`` and ``nmi`` files."""
    return info_window(run.counters.info, period, run.counters.core)
