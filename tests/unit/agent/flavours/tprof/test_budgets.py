from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from harness.agent.flavours.tprof.budgets import check_stop_latency, stop_budget_ns
from harness.agent.flavours.tprof.oracles import applicable_oracles, check_tprof
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import Injections
from tests.unit.agent.flavours.tprof.test_oracles import BASE, Brief, brief, broken

#: `BASE` (slowest handlers 8 µs and 12 µs) in a guest whose clock counts instructions.
TIMED = replace(BASE, instruction_clock=True)


def test_the_stop_budget_is_the_spec_figure_in_guest_ns() -> None:
    assert stop_budget_ns(AgentSpec(drain="manual")) == 1_000_000_000
    assert stop_budget_ns(AgentSpec(drain="auto", drain_ms=250)) == 1_250_000_000


def test_budgets_apply_only_where_the_clock_counts_instructions() -> None:
    assert {"C-3", "TP-O10"} & applicable_oracles(BASE) == set()
    assert {"C-3", "TP-O10"} <= applicable_oracles(TIMED)
    slow = broken(BASE, core={1: {"x_nmi_max_ns": 10**9}}, stats={"x_stop_ns": 10**10})
    assert check_tprof(slow) == []  # wall clock under TCG: not judged
    assert check_tprof(TIMED) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"core": {1: {"x_nmi_max_ns": 100_001}}},
            [("C-3", 1, "x_nmi_max_ns ≤ 100000", "x_nmi_max_ns = 100001")],
            id="C-3 one call over 100 µs",
        ),
        pytest.param(
            {"core": {0: {"x_nmi_max_ns": 1_200_000}}, "injections": Injections(nmi={0: 12})},
            [],
            id="C-3 a burst of 12 may take 12 × 100 µs",
        ),
        pytest.param(
            {"core": {0: {"x_nmi_max_ns": 1_200_001}}, "injections": Injections(nmi={0: 12})},
            [("C-3", 0, "x_nmi_max_ns ≤ 1200000", "x_nmi_max_ns = 1200001")],
            id="C-3 a burst of 12 over budget",
        ),
        pytest.param(
            {"stats": {"x_stop_ns": 1_000_000_001}},
            [("TP-O10", None, "x_stop_ns ≤ 1000000000", "x_stop_ns = 1000000001")],
            id="TP-O10 manual drain: 1 s",
        ),
        pytest.param(
            {
                "stats": {"x_stop_ns": 1_500_000_000},
                "kicks": None,
                "runtime_s": 4.0,
                "spec": replace(BASE.spec, drain="auto", drain_ms=1000),
            },
            [],
            id="TP-O10 auto drain: the period more",
        ),
    ],
)
def test_breaking_a_budget(changes: dict[str, Any], expected: list[Brief]) -> None:
    run = broken(TIMED, **changes)
    budgets = [v for v in check_tprof(run) if v.oracle == "C-3"] + check_stop_latency(run)
    assert brief(budgets) == expected
