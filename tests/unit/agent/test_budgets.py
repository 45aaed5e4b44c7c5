"""C-3, the core's handler budget: the model, where it applies, and every flavour's scenario."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.mutants import for_flavour
from harness.agent.oracles.budgets import check_handler_budget, handler_budget_ns
from harness.agent.oracles.core import applicable_core, check_core
from harness.agent.oracles.evidence import Injections
from harness.scenarios.load import load_scenario
from tests.unit.agent.test_core_oracles import VIEW, core

#: `VIEW` (CPU 0: 10 calls injected in NMI bursts) in a guest whose clock counts instructions.
TIMED = replace(VIEW, instruction_clock=True)


def test_the_budget_is_the_spec_figure_in_guest_ns() -> None:
    assert [handler_budget_ns(k) for k in (0, 1, 12)] == [100_000, 100_000, 1_200_000]


def test_c3_applies_only_where_the_clock_counts_instructions() -> None:
    slow = {0: core(x_nmi_total=100, x_producer_calls_nmi=108, x_nmi_max_ns=10**9)}
    assert "C-3" not in applicable_core(VIEW)
    assert check_core(replace(VIEW, core={**VIEW.core, **slow})) == []  # wall clock: not judged
    assert "C-3" in applicable_core(TIMED)
    assert [v.oracle for v in check_core(replace(TIMED, core={**VIEW.core, **slow}))] == ["C-3"]


@pytest.mark.parametrize(
    ("slowest", "nmi", "expected"),
    [
        pytest.param(100_000, {}, [], id="one call: 100 µs"),
        pytest.param(
            100_001, {}, [(1, "x_nmi_max_ns ≤ 100000", "x_nmi_max_ns = 100001")], id="one call over"
        ),
        pytest.param(1_200_000, {1: 12}, [], id="a burst of 12 may take 12 × 100 µs"),
        pytest.param(
            1_200_001,
            {1: 12},
            [(1, "x_nmi_max_ns ≤ 1200000", "x_nmi_max_ns = 1200001")],
            id="a burst of 12 over",
        ),
        pytest.param(
            1_200_000,
            {0: 12},
            [(1, "x_nmi_max_ns ≤ 100000", "x_nmi_max_ns = 1200000")],
            id="another CPU's burst does not widen this one's",
        ),
    ],
)
def test_breaking_the_budget(
    slowest: int, nmi: dict[int, int], expected: list[tuple[int, str, str]]
) -> None:
    counters = {0: {"x_nmi_max_ns": 5}, 1: {"x_nmi_max_ns": slowest}}
    found = check_handler_budget(counters, Injections(nmi=nmi))
    assert [(v.cpu, v.expected, v.observed) for v in found] == expected
    assert {v.oracle for v in found} <= {"C-3"}


@pytest.mark.parametrize("name", flavours.names())
def test_every_flavour_has_a_budget_scenario_c3_judges_and_slow_producer_breaks(
    name: str,
) -> None:
    flavour = behaviour(name)
    assert "C-3" in flavour.oracle_names
    assert flavour.budget_scenario is not None
    scenario = load_scenario(flavour.budget_scenario)
    assert scenario.agent.flavour == name
    assert "C-3" in {item.oracle for item in scenario.expect}
    assert scenario.guest.topology.cpus == 1  # one vCPU: a handler's interval is its own
    assert [m.case for m in for_flavour(name) if m.name == "slow_producer"] == ["deterministic"]
