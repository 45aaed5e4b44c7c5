"""A flavour's own ops are declared once (`Flavour.ops`); the interface takes them from there."""

from __future__ import annotations

import pytest

from harness.agent.controlspec import ArgRange, OpDecl, own_ops
from harness.agent.flavour import OpRule, behaviour
from harness.errors import ConfigError
from harness.fuzz.generate import interface_of

RULES = {
    "reader": OpRule(on=True),
    "stop": OpRule(),
    "burst": OpRule(cpu="one", count_max=100),
    "nap": OpRule(ms_max=50),
}


def test_an_op_not_given_is_declared_from_its_rule_and_not_drawn() -> None:
    reader, stop, burst, nap = own_ops(RULES)
    assert [d.op for d in (reader, stop, burst, nap)] == list(RULES)
    assert {d.weight for d in (reader, stop, burst, nap)} == {0}
    assert (reader.switch, reader.blocks, reader.args) == (True, True, ())
    assert (stop.cpu, stop.switch, stop.args) == (None, False, ())
    assert burst.cpu == "one"
    assert burst.arg("count") == ArgRange("count", (1, 100), edge=(1,))
    assert nap.arg("ms") == ArgRange("ms", (1, 50), edge=(1,))


def test_an_op_given_is_declared_as_given_in_the_rules_order() -> None:
    drawn = OpDecl("burst", cpu="one", args=(ArgRange("count", (1, 40), edge=(1, 100)),), weight=3)
    ops = own_ops(RULES, drawn)
    assert [d.op for d in ops] == list(RULES)
    assert ops[2] is drawn


def test_a_drawn_op_may_narrow_its_rule_and_weigh_more() -> None:
    """The rule is what a scenario may give; the draw, where the budget goes (dt's skip)."""
    narrow = ArgRange("count", (10, 20), edge=(1, 100), invalid=(50,))
    drawn = OpDecl("burst", cpu="one", args=(narrow,), weight=5)
    burst = own_ops(RULES, drawn)[2]
    assert (burst.arg("count"), burst.weight) == (narrow, 5)


def _burst(arg: ArgRange | None) -> OpDecl:
    return OpDecl("burst", cpu="one", args=(arg,) if arg else ())


@pytest.mark.parametrize(
    ("drawn", "says"),
    [
        (OpDecl("kick"), "not among the flavour's own"),
        (OpDecl("burst", cpu="one-or-all", args=(ArgRange("count", (1, 9)),)), "cpu one-or-all"),
        (OpDecl("reader"), "on: False"),
        (_burst(ArgRange("count", (1, 9), invalid=(101,))), "1 to 100"),
        (_burst(ArgRange("count", (1, 9), edge=(0,))), "1 to 100"),
        (_burst(ArgRange("count", (50, 101))), "count \\(50, 101\\) \\(its rule: 1 to 100\\)"),
        (_burst(None), "no count \\(its rule requires one\\)"),
        (OpDecl("stop", args=(ArgRange("ms", (1, 9)),)), "a ms \\(its rule takes none\\)"),
    ],
)
def test_an_op_given_must_be_one_its_rule_lets_a_scenario_give(drawn: OpDecl, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        own_ops(RULES, drawn)


#: The in-tree flavours' own ops the fuzzer declares and does not draw.
NOT_DRAWN = {"tprof": set(), "dt": set(), "kprof": {"kpdata"}, "hwpmc": {"pmc", "process"}}


@pytest.mark.parametrize("flavour", list(NOT_DRAWN))
def test_an_in_tree_interface_declares_each_own_op_from_its_rule(flavour: str) -> None:
    rules = behaviour(flavour).ops
    own = [decl for decl in interface_of(flavour).ops if decl.op in rules]
    assert [decl.op for decl in own] == list(rules)
    assert {decl.op for decl in own if decl.weight == 0} == NOT_DRAWN[flavour]
