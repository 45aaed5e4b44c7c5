"""A flavour's judging, declared once and composed by `harness.agent.judging`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest

from harness.agent.flavours.tprof.data import TPROF
from harness.agent.judging import Judging, Laws, compose
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content_view import ContentView, view_of
from harness.agent.oracles.core import CORE_ORACLES, CoreView, core_view_of
from harness.agent.oracles.evidence import RunEvidence
from harness.agent.values.results import CORE_NAMES, Judged, Violation
from harness.errors import ConfigError

PerCpu = Mapping[int, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class Run(RunEvidence):
    """A run of the smallest shape the composition reads."""

    core: PerCpu = field(default_factory=dict)
    percpu: PerCpu = field(default_factory=dict)
    odd: bool = False  # LAW-B applies only to odd runs

    def content(self) -> ContentView:
        return view_of((), None, None)

    def numbers(self) -> dict[str, int]:
        return {}

    def records(self) -> Sequence[object]:
        return ()


def _core(run: Run) -> CoreView:
    return core_view_of(run, run.core)


def _law_a(run: Run) -> list[Violation]:
    return [Violation("LAW-A", cpu, "kept = 0", str(c["x_sample"]), "") for cpu, c in
            sorted(run.percpu.items()) if c["x_sample"]]  # fmt: skip


def _law_b(run: Run) -> list[Violation]:
    return [Violation("LAW-B", None, "never", "always", "")]


LAWS = Laws(
    name="tprof",
    oracles=(("LAW-A", "nothing is kept"), ("LAW-B", "odd runs fail")),
    checks={"LAW-B": _law_b, "LAW-A": _law_a},  # the table's order is the report's
    compared=lambda run: [Judged("LAW-A", len(run.percpu), "CPUs"), Judged("LAW-B", 1, "run")],
    core=_core,
    applies={"LAW-B": lambda run: run.odd},
)
JUDGING = Judging(
    kind=Run,
    laws=LAWS,
    percpu=lambda run: run.percpu,
    recorded="x_sample",
    drops=(("overflow", "x_overflow"),),
    columns=(("sample", "x_sample"),),
    footer=lambda run: "the end",
)


def run_of(kept: int, *, odd: bool = False, flavour: str = "tprof") -> Run:
    core = {
        cpu: dict.fromkeys(CORE_NAMES, 0)
        | {"x_nmi_total": 2, "x_producer_calls": 2, "x_producer_calls_nmi": 2}
        for cpu in (0, 1)
    }
    percpu = {0: {"x_sample": kept, "x_overflow": 1}, 1: {"x_sample": 0, "x_overflow": 0}}
    return Run(spec=AgentSpec(flavour=flavour), core=core, percpu=percpu, odd=odd)


def test_a_law_applies_only_where_it_says_and_is_checked_in_table_order() -> None:
    assert "LAW-B" not in LAWS.applicable(run_of(0))
    assert LAWS.check(run_of(0)) == []
    found = [v.oracle for v in LAWS.check(run_of(3, odd=True))]
    assert found == ["LAW-A", "LAW-B"]


def test_another_flavours_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="flavour is 'dt'"):
        LAWS.check(run_of(0, flavour="dt"))


def test_composed_judging_adds_the_shared_and_content_oracles() -> None:
    judges = compose(JUDGING, TPROF)
    names = [name for name, _ in judges.oracles]
    assert names[: len(CORE_ORACLES) + 2] == [*(n for n, _ in CORE_ORACLES), "LAW-A", "LAW-B"]
    assert "MODE" in names[len(CORE_ORACLES) + 2 :]
    assert [v.oracle for v in judges.check(run_of(1))] == ["LAW-A"]
    assert {j.oracle for j in judges.judged(run_of(1))} >= {"LAW-A", "CALLS"}


def test_declared_columns_make_the_table_and_the_matrix_rows() -> None:
    judges = compose(JUDGING, TPROF)
    run = run_of(4)
    lines = judges.report(run, judges.check(run)).splitlines()
    assert lines[1].split() == ["cpu", "irq", "seen", "calls", "sample", "nmi%", "deliv%"]
    assert [line.split()[0] for line in lines[2:5]] == ["0", "1", "all"]
    assert lines[4].split()[2:5] == ["4", "4", "4"]  # seen, calls, sample: summed
    assert lines[5] == "the end"
    assert any(line.startswith("FAIL") and "LAW-A" in line for line in lines)
    rows = judges.cell_rows(run)
    assert [(r.cpu, r.recorded, dict(r.drops), r.overflows) for r in rows] == [
        (0, 4, {"overflow": 1}, 2),
        (1, 0, {"overflow": 0}, 2),
    ]


def test_a_column_that_is_no_counter_of_the_flavour_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"tprof's judging names counters .*: kept, x_lost"):
        compose(replace(JUDGING, recorded="kept", drops=(("lost", "x_lost"),)), TPROF)
