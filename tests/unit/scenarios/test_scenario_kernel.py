"""A scenario's ``[guest] kernel``: Debian's 6.1 unless it names another known version."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.scenarios.load import load_scenario

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
