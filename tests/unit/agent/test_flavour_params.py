"""A flavour's own load parameters: spec, insmod arguments, generated C, scenarios.

No shipped flavour may be needed to exercise the mechanism, so the tests register
a copy of dt that owns two parameters (``monkeypatch`` on the registry dict).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavours.dt.data import DT
from harness.agent.module.render import render_agent
from harness.agent.module.spec import AgentSpec, parse_params
from harness.agent.values.info import Param
from harness.errors import ConfigError
from harness.scenarios.load import load_scenario

RING = Param("ring_slots", 16, 2, 4096, "slots per ring")
GRACE = Param("grace_ms", 4, 1, 1000, "sweep period")


@pytest.fixture(autouse=True)
def _own_params(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(flavours.FLAVOURS, "dt", replace(DT, params=(RING, GRACE)))


def test_a_parameter_left_out_has_its_default_and_an_override_wins() -> None:
    spec = AgentSpec(flavour="dt").with_params(grace_ms=9)
    assert spec.param("ring_slots") == 16
    assert spec.param("grace_ms") == 9
    assert spec.flavour_params() == (("ring_slots", 16), ("grace_ms", 9))


def test_insmod_arguments_carry_every_parameter_of_the_flavour() -> None:
    args = AgentSpec(flavour="dt").with_params(ring_slots=64).validate().module_params()
    assert "ring_slots=64" in args
    assert "grace_ms=4" in args


def test_another_flavour_gets_none_of_them() -> None:
    args = AgentSpec(flavour="tprof").module_params()
    assert not [a for a in args if a.startswith(("ring_slots=", "grace_ms="))]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ((("ring_slots", 1),), r"ring_slots=1 is outside 2\.\.4096 \(slots per ring\)"),
        ((("ring_slots", 4097),), r"ring_slots=4097 is outside"),
        ((("nsamples", 8),), r"flavour dt has no parameter 'nsamples'; its parameters: "
         r"ring_slots, grace_ms"),
        ((("grace_ms", 2), ("grace_ms", 3)), r"names a parameter twice"),
    ],
)  # fmt: skip
def test_impossible_parameters_are_refused_naming_them(
    params: tuple[tuple[str, int], ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        AgentSpec(flavour="dt", params=params).validate()


def test_another_flavours_parameter_is_refused_listing_its_own() -> None:
    with pytest.raises(ConfigError, match=r"tprof has no parameter 'grace_ms'.*: est_freq, "):
        AgentSpec(flavour="tprof", params=(("grace_ms", 4),)).validate()


def test_param_options_parse_and_bad_ones_say_how_to_write_them() -> None:
    assert parse_params("dt", ["grace_ms=0x10", "ring_slots=8"]) == (
        ("grace_ms", 16),
        ("ring_slots", 8),
    )
    for bad in ("grace_ms", "grace_ms=four", "=3"):
        with pytest.raises(ConfigError):
            parse_params("dt", [bad])


def test_the_generated_c_declares_every_flavours_parameters_with_the_specs_values() -> None:
    files = render_agent(AgentSpec(flavour="dt").with_params(ring_slots=32)).files
    core, header = files["core.c"], files["profagent.h"]
    assert "unsigned long pa_ring_slots = 32;" in core
    assert "unsigned long pa_grace_ms = 4;" in core
    assert "module_param_named(ring_slots, pa_ring_slots, ulong, 0444);" in core
    assert 'seq_printf(m, "grace_ms=%lu\\n", pa_grace_ms);' in core
    assert "extern unsigned long pa_ring_slots;" in header


def test_a_parameter_changes_the_build_key() -> None:
    base = AgentSpec(flavour="dt")
    keys = {render_agent(spec).key for spec in (base, base.with_params(ring_slots=32))}
    assert len(keys) == 2
    assert render_agent(base.with_params(ring_slots=16)).key == render_agent(base).key


def test_a_name_shared_with_the_core_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        flavours.FLAVOURS, "dt", replace(DT, params=(Param("period", 1, 1, 2, "clash"),))
    )
    with pytest.raises(ConfigError, match=r"clash: \['period'\]"):
        render_agent(AgentSpec(flavour="tprof"))


SCENARIO = """name = "{name}"
description = "params"
seed = 1
[guest]
topology = "1s1cl1c1t"
[agent]
flavour = "{flavour}"
{extra}
[[expect]]
oracle = "DT-O1"
"""


def _scenario(tmp_path: Path, flavour: str, extra: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(SCENARIO.format(name="p", flavour=flavour, extra=extra))
    return path


def test_a_scenario_sets_a_flavour_parameter_by_its_name(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path, "dt", "grace_ms = 7"))
    assert scenario.agent.param("grace_ms") == 7
    assert scenario.agent.param("ring_slots") == 16


def test_a_scenario_parameter_out_of_range_names_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"key 'agent\.grace_ms'.*outside 1\.\.1000"):
        load_scenario(_scenario(tmp_path, "dt", "grace_ms = 0"))


def test_another_flavours_parameter_is_an_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"key 'agent\.grace_ms': unknown key"):
        load_scenario(_scenario(tmp_path, "tprof", "grace_ms = 7"))
