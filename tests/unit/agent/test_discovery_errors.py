"""A flavour package that cannot join is one line naming it, where it was found, and why.

Each test breaks one part of a tiny package (`tests.unit.agent.packages`) and finds it
as ``--flavour-path`` would (`harness.agent.external.use_flavours`), before any guest
could boot: the error is a `FlavourPackageError` (a `ConfigError`: exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.agent.external import use_flavours
from harness.errors import ConfigError, FlavourPackageError
from tests.unit.agent.packages import (
    DATA,
    FLAVOUR,
    TEMPLATE,
    fresh_name,
    isolated_registry,
    write_distribution,
    write_package,
    write_pyproject,
)

pytestmark = pytest.mark.usefixtures(isolated_registry.__name__)


def refused(*directories: Path) -> str:
    """The one line `use_flavours` refuses ``directories`` with."""
    with pytest.raises(FlavourPackageError) as caught:
        use_flavours(directories)
    text = str(caught.value)
    assert "\n" not in text, text
    assert isinstance(caught.value, ConfigError)
    return text


@pytest.mark.parametrize(
    ("part", "says"),
    [("data", "no data.py in "), ("flavour", "no flavour.py in "), ("template", ".c.j2 in ")],
)
def test_a_missing_part_is_named(tmp_path: Path, part: str, says: str) -> None:
    name = fresh_name()
    package = write_package(tmp_path, name, **{part: None})  # type: ignore[arg-type]
    text = refused(package)
    assert text.startswith(f"flavour package pbt_{name} (--flavour-path {package}): ")
    assert says in text


def test_a_data_module_without_info_is_named(tmp_path: Path) -> None:
    text = refused(write_package(tmp_path, fresh_name(), data="INFO = 3\n"))
    assert "data.py has an INFO that is a int, not a FlavourInfo" in text
    text = refused(write_package(tmp_path, fresh_name(), data="X = 3\n"))
    assert "data.py has no INFO, not a FlavourInfo" in text


def test_a_data_module_that_does_not_import_is_named(tmp_path: Path) -> None:
    text = refused(write_package(tmp_path, fresh_name(), data="import no_such_module_here\n"))
    assert "data.py does not import: ModuleNotFoundError: No module named" in text


@pytest.mark.parametrize(
    ("flavour", "says"),
    [
        ("FLAVOUR = None\n", "flavour.py has no FLAVOUR, not a harness.agent.flavour.Flavour"),
        ("FLAVOUR = 3\n", "flavour.py has a FLAVOUR that is a int, not a harness.agent.flavour"),
        ("raise RuntimeError('half written')\n", "flavour.py does not import: RuntimeError: half"),
    ],
)
def test_a_flavour_module_without_a_flavour_is_named(
    tmp_path: Path, flavour: str, says: str
) -> None:
    assert says in refused(write_package(tmp_path, fresh_name(), flavour=flavour))


def test_a_flavour_over_other_data_is_named(tmp_path: Path) -> None:
    other = FLAVOUR.replace("from {package}.data import INFO", "from harness.agent.flavours."
                            "tprof.data import TPROF as INFO")  # fmt: skip
    text = refused(write_package(tmp_path, fresh_name(), flavour=other))
    assert "flavour.py's FLAVOUR.info is not data.py's INFO (it names 'tprof')" in text


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{{{{ no_such_value }}}}\n", "its template does not render: template "),
        ("{{% for x in %}}\n", "line 1: Expected an expression, got 'end of statement block'"),
    ],
)
def test_a_template_that_does_not_render_is_named(tmp_path: Path, template: str, says: str) -> None:
    name = fresh_name()
    text = refused(write_package(tmp_path, name, template=template))
    assert says in text
    assert f"{name}.c.j2" in text


def test_a_name_an_in_tree_flavour_has_is_refused(tmp_path: Path) -> None:
    data = DATA.replace('name="{name}"', 'name="tprof"')
    package = write_package(tmp_path, "x" + fresh_name(), data=data, template=None)
    (package / "tprof.c.j2").write_text(TEMPLATE.format(name="tprof"))
    assert "its flavour name 'tprof' is an in-tree flavour's" in refused(package)


def test_a_name_another_package_has_is_refused(tmp_path: Path) -> None:
    name = fresh_name()
    first = write_package(tmp_path / "a", name)
    second = write_package(tmp_path / "b", name, package=f"pbt_{name}_again")
    text = refused(first, second)
    assert text.startswith(f"flavour package pbt_{name}_again (--flavour-path {second}): ")
    assert f"its flavour name {name!r} is taken by pbt_{name} (--flavour-path {first})" in text


@pytest.mark.parametrize(
    ("replace", "says"),
    [
        (('name="{name}"', 'name="My-Port"'), "its flavour name 'My-Port' is not lower-case"),
        (("flavour_id={flavour_id}", "flavour_id=1"), "its flavour id 1 is tprof's"),
        (('"{name}_rec"', '"tprof_sample"'), "its record layout 'tprof_sample' is tprof's"),
        (('"{name}_lose"', '"drop_7th_overflow"'), "its mutant 'drop_7th_overflow' is the core's"),
        (
            ('("x_recorded", "recorded")', '("x_producer_calls", "calls")'),
            "its counter 'x_producer_calls' is the core's",
        ),
        (
            ('("x_recorded", "recorded")', '("dc_dropevt", "dropped")'),
            "its counter 'dc_dropevt' is dt's",
        ),
    ],
)
def test_what_the_core_or_another_flavour_has_is_refused(
    tmp_path: Path, replace: tuple[str, str], says: str
) -> None:
    data = DATA.replace(*replace)
    assert says in refused(write_package(tmp_path, fresh_name(), data=data))


def test_a_name_the_core_s_templates_use_is_refused(tmp_path: Path) -> None:
    data = DATA.replace('name="{name}"', 'name="layouts"')
    package = write_package(tmp_path, "x" + fresh_name(), data=data, template=None)
    (package / "layouts.c.j2").write_text("/* nothing */\n")
    text = refused(package)
    assert "does not render: flavour layouts's name is already a template value" in text


def test_a_load_parameter_the_core_has_is_refused(tmp_path: Path) -> None:
    data = DATA.replace(
        "    mutants=", '    params=(Param("period", 1, 0, 9, "x"),),\n    mutants='
    )
    data = data.replace("import FlavourInfo, Mutant", "import FlavourInfo, Mutant, Param")
    assert "its load parameter 'period' is the core's" in refused(
        write_package(tmp_path, fresh_name(), data=data)
    )


def test_an_entry_point_that_names_another_flavour_is_refused(tmp_path: Path) -> None:
    name = fresh_name()
    write_package(tmp_path, name)
    text = refused(write_pyproject(tmp_path, {"other": f"pbt_{name}"}))
    assert f"its entry point is 'other' but data.py's INFO names {name!r}" in text


def test_an_entry_point_to_nothing_is_refused(tmp_path: Path) -> None:
    write_distribution(tmp_path, {"ghost": "pbt_no_such_package"})
    sys.path.append(str(tmp_path))
    text = refused()
    assert text == (
        "flavour package pbt_no_such_package (entry point profbench.flavours:ghost): "
        "no package of that name can be imported"
    )


def test_a_path_that_holds_no_flavour_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path / "nowhere").endswith("): no such directory")
    assert "no pyproject.toml declaring a [project.entry-points.'profbench.flavours'] table, " \
           "and not a package itself (no __init__.py)" in refused(tmp_path)  # fmt: skip


def test_a_package_shadowed_by_another_of_its_name_is_refused(tmp_path: Path) -> None:
    name = fresh_name()
    write_package(tmp_path / "first", name)
    sys.path.append(str(tmp_path / "first"))  # an installed one, ahead of the checkout
    write_package(tmp_path / "second", name)
    text = refused(write_pyproject(tmp_path / "second", {name: f"pbt_{name}"}))
    assert f"imports from {tmp_path / 'first' / f'pbt_{name}'}, not {tmp_path / 'second'}" in text
