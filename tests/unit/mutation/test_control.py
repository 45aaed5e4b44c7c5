"""A control is clean only where each oracle its mutants rely on compared something."""

from __future__ import annotations

from harness.agent.mutants import merge, unjudged_token
from harness.agent.values.info import Mutant
from harness.mutation.cases import relied_on
from harness.mutation.groups import _held_to

CHAIN = Mutant("chain_cut", "a chain cut short", ("CHAIN",))
PROFILE = Mutant("ts_skew", "timestamps ahead", (unjudged_token("PROFILE"),), case="peer")
HW = Mutant("sc_never", "counting never counts", ("HW-SC",), case="counting")
PLAN = [(None, ("standard", "exact")), (CHAIN, ("standard", "exact")), (PROFILE, ("peer",)),
        (HW, ("counting",))]  # fmt: skip


def test_the_control_relies_on_the_oracles_of_the_mutants_run_through_its_cases() -> None:
    assert relied_on(PLAN, ("standard", "exact")) == {"CHAIN"}
    assert relied_on(PLAN, ("standard", "exact", "peer", "counting")) == {
        "CHAIN",
        "PROFILE",
        "HW-SC",
    }


def test_a_control_whose_relied_on_oracle_judged_nothing_is_not_clean() -> None:
    cases: list[tuple[str, set[str]]] = [("standard", set()), ("exact", set())]
    assert merge("none", "dt", (), _held_to(cases, set())).verdict == "clean"
    held = _held_to(cases, {"CHAIN"})
    assert held[-1] == ("exact", {unjudged_token("CHAIN")})
    row = merge("none", "dt", (), held)
    assert row.verdict == "BROKEN"
    assert row.failed == (unjudged_token("CHAIN"),)
