"""The one template environment: ``guest/`` and the roots flavour packages add."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.templates import add_root, render

_NUMBERS = itertools.count(1)


def test_a_root_renders_its_own_files_by_prefix(tmp_path: Path) -> None:
    name = f"root{next(_NUMBERS)}"
    (tmp_path / "x.c.j2").write_text("int {{ value }};\n")
    assert add_root(name, tmp_path) == f"{name}:"
    assert add_root(name, tmp_path) == f"{name}:"  # the same directory again: nothing
    assert render(f"{name}:x.c.j2", {"value": "seven"}) == "int seven;\n"


def test_a_root_name_cannot_move_to_another_directory(tmp_path: Path) -> None:
    name = f"root{next(_NUMBERS)}"
    add_root(name, tmp_path)
    with pytest.raises(ConfigError, match=f"template root '{name}' is {tmp_path}, not "):
        add_root(name, tmp_path / "elsewhere")


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    name = f"root{next(_NUMBERS)}"
    (tmp_path / "bad.j2").write_text("ok\n{% if %}\n")
    add_root(name, tmp_path)
    with pytest.raises(ConfigError, match=rf"template {tmp_path / 'bad.j2'} line 2: "):
        render(f"{name}:bad.j2", {})
    with pytest.raises(ConfigError, match=rf"template {tmp_path / 'gone.j2'} not found$"):
        render(f"{name}:gone.j2", {})
    with pytest.raises(ConfigError, match=r"template guest/agent/none\.j2 not found under "):
        render("agent/none.j2", {})
