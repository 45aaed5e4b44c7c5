"""The shared stress plan as written (`harness.scenarios.stress`): pure, no guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.values.stress import Provoke, Stress
from harness.errors import ConfigError
from harness.scenarios.load import load_scenario
from harness.scenarios.stress import EXTRA, case_names, stress_plan

SKEL_LIKE = Stress(
    agent={"pmu_produce": False},
    capacity=16,
    full="x_full",
    causes=("x_full", "x_stopped", "x_nested"),
    recorded="x_recorded",
    provoke=(Provoke("x_nested", 7, ({"op": "inject", "cpu": 0, "count": 1},)),),
    unprovoked={"x_stopped": "no op stops it"},
)


@pytest.mark.parametrize("name", flavours.names())
@pytest.mark.parametrize("layout", ["1s1cl1c1t", "2s2cl1c2t"])
def test_every_case_of_every_flavour_is_a_valid_scenario(
    name: str, layout: str, tmp_path: Path
) -> None:
    cpus = 1 if layout == "1s1cl1c1t" else 8
    plan = stress_plan(name, behaviour(name).stress, layout, cpus)
    assert [c.name for c in plan.cases] == list(case_names(behaviour(name).stress))
    for case in plan.cases:
        path = tmp_path / f"{case.file}.toml"
        path.write_text(case.text)
        scenario = load_scenario(path)  # the loader's every check, the flavour's ops
        assert scenario.agent.flavour == name
        assert scenario.guest.topology.cpus == cpus


def test_the_fill_expects_a_different_count_on_neighbouring_cpus() -> None:
    plan = stress_plan("skel", SKEL_LIKE, "1s1cl4c1t", 4)
    fill = plan.cases[0].text
    for cpu in range(4):
        extra = EXTRA[cpu % 3]
        assert f'op = "inject"\ncpu = {cpu}\ncount = {16 + extra}\n' in fill
        assert f'value = "percpu.{cpu}.x_full"\nequals = {extra}\n' in fill
        assert f'value = "percpu.{cpu}.x_recorded"\nequals = 16\n' in fill
        for other in ("x_stopped", "x_nested"):
            assert f'value = "percpu.{cpu}.{other}"\nequals = 0\n' in fill
    assert len({EXTRA[c % 3] for c in range(3)}) == 3


def test_a_provoked_cause_is_the_only_one_counted_and_only_on_cpu_0() -> None:
    (case,) = [c for c in stress_plan("skel", SKEL_LIKE, "1s1cl2c1t", 2).cases
               if c.name == "cause-x_nested"]  # fmt: skip
    assert 'value = "percpu.0.x_nested"\nequals = 7\n' in case.text
    assert 'value = "percpu.1.x_nested"\nequals = 0\n' in case.text
    assert 'value = "percpu.0.x_full"\nequals = 0\n' in case.text


def test_a_shared_buffer_is_judged_by_its_sums() -> None:
    shared = Stress(agent={}, capacity=10, granule=5, global_buffer=True, spill=1,
                    full="x_full", causes=("x_full", "x_other"))  # fmt: skip
    fill = stress_plan("skel", shared, "1s1cl2c1t", 2).cases[0].text
    assert "cpu = 0\ncount = 16\n" in fill  # capacity, one granule, the spill
    assert "cpu = 1\ncount = 11\n" in fill  # two granules, the spill
    assert 'value = "stats.x_full"\nequals = 15\n' in fill
    assert "percpu." not in fill


def test_what_a_flavour_did_not_declare_is_named_not_passed() -> None:
    plan = stress_plan("skel", SKEL_LIKE, "1s1cl1c1t", 1)
    assert dict(plan.missing) == {
        "cause-x_stopped": "no op stops it",
        "reader": "skel declares no reader concurrent with its producers",
        "restart": "skel declares no steps that stop and start it",
    }
    nothing = stress_plan("skel", None, "1s1cl1c1t", 1)
    assert nothing.cases == ()
    assert [case for case, _ in nothing.missing] == ["every case"]


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        ({"full": "x_unknown"}, "x_unknown not among its causes"),
        ({"unprovoked": {"x_nested": "twice"}}, "at most once"),
    ],
)
def test_a_declaration_that_names_a_cause_wrongly_is_refused(
    changed: dict[str, object], why: str
) -> None:
    fields = {"agent": {}, "capacity": 1, "full": "x_full", "causes": SKEL_LIKE.causes,
              "provoke": SKEL_LIKE.provoke, **changed}  # fmt: skip
    with pytest.raises(ConfigError, match=why):
        stress_plan("skel", Stress(**fields), "1s1cl1c1t", 1)  # type: ignore[arg-type]
