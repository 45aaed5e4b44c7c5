"""A scenario's ``[guest] kernel``: Debian's 6.1 unless it names another known version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.scenarios.load import load_scenario, on_kernel, scenario_source

SHIPPED = REPO_ROOT / "scenarios" / "dt-d1-fixed-1cpu.toml"


def with_kernel(tmp_path: Path, line: str) -> Path:
    text = SHIPPED.read_text().replace("[guest]\n", f"[guest]\n{line}\n", 1)
    path = tmp_path / SHIPPED.name
    path.write_text(text)
    return path


def test_a_scenario_boots_61_unless_it_names_a_kernel(tmp_path: Path) -> None:
    assert load_scenario(SHIPPED).guest.kernel == "6.1"
    assert load_scenario(with_kernel(tmp_path, 'kernel = "6.12"')).guest.kernel == "6.12"


def test_an_unknown_kernel_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"guest\.kernel.*unknown kernel version '5\.4'"):
        load_scenario(with_kernel(tmp_path, 'kernel = "5.4"'))


def test_on_kernel_moves_a_default_kernel_scenario_and_nothing_else(tmp_path: Path) -> None:
    scenario = load_scenario(SHIPPED)
    moved = on_kernel(scenario, "6.12")  # pytest tests/scenarios --kernel 6.12
    assert moved.guest.kernel == "6.12"
    assert replace(moved, guest=scenario.guest) == scenario
    own = load_scenario(with_kernel(tmp_path, 'kernel = "6.12"'))
    assert on_kernel(own, "6.1") == own  # a scenario that names a kernel keeps it
    with pytest.raises(ConfigError, match=r"unknown kernel version '5\.4'"):
        on_kernel(scenario, "5.4")


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda text: text, "a [guest] table without kernel"),
        (lambda text: text.replace("[guest]\n", '[guest]\nkernel = "6.1"\n', 1), "kernel = 6.1"),
    ],
)
def test_a_bundles_scenario_file_replays_on_the_kernel_it_ran_on(
    tmp_path: Path, edit: Callable[[str], str], why: str
) -> None:
    source = tmp_path / "src" / SHIPPED.name
    source.parent.mkdir()
    source.write_text(edit(SHIPPED.read_text()))
    scenario = load_scenario(source)
    assert scenario.guest.kernel == "6.1", why
    assert scenario_source(scenario) == source.read_text()  # not switched: the file as it is
    moved = on_kernel(scenario, "6.12")
    kept = tmp_path / SHIPPED.name  # what a bundle's replay loads
    kept.write_text(scenario_source(moved))
    assert replace(load_scenario(kept), path=source) == moved, why
