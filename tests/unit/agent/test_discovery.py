"""Flavours outside the tree: found by path, checkout, entry point and environment.

Every test builds a tiny flavour package in its own directory (`tests.unit.agent.packages`)
and finds it the way a user would; the registry, the renderer and the behaviour lookup
then treat it as they treat the four in-tree flavours.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.external import check_outside, use_flavours
from harness.agent.flavour import behaviour
from harness.agent.flavours.discovery import PATH_ENV
from harness.agent.module.render import render_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.mutants import for_flavour
from harness.errors import ConfigError
from harness.scenarios.load import load_scenario
from tests.unit.agent.packages import (
    fresh_name,
    isolated_registry,
    write_distribution,
    write_package,
    write_pyproject,
)

pytestmark = pytest.mark.usefixtures(isolated_registry.__name__)
IN_TREE = ("tprof", "dt", "kprof", "hwpmc")


def test_a_package_named_by_path_joins_after_the_in_tree_flavours(tmp_path: Path) -> None:
    name = fresh_name()
    package = write_package(tmp_path, name)
    assert use_flavours([package]) == (name,)
    assert flavours.names() == (*IN_TREE, name)
    assert flavours.get(name).stat_names == ("x_calls",)
    assert flavours.package(name).template == f"{name}:{name}.c.j2"
    assert behaviour(name).info is flavours.get(name)
    assert [m.name for m in for_flavour(name)][-1] == f"{name}_lose"


def test_its_template_renders_beside_the_core_and_the_in_tree_flavours(tmp_path: Path) -> None:
    name = fresh_name()
    use_flavours([write_package(tmp_path, name)])
    files = render_agent(AgentSpec(flavour=name, period=250_000)).files
    assert files[f"{name}.c"].startswith(f"/* {name}: period 250000 */\n/* stat x_calls */\n")
    assert f"pa_flavour_{name}" in files["core.c"]  # the core's flavour table holds it
    assert f"{name}.o" in files["Kbuild"]
    assert f"struct {name}_rec" in files["profagent_abi.h"]
    assert {f"{n}.c" for n in IN_TREE} <= set(files)


def test_the_in_tree_flavours_render_the_same_with_one_outside(tmp_path: Path) -> None:
    before = render_agent(AgentSpec()).files
    use_flavours([write_package(tmp_path, fresh_name())])
    after = render_agent(AgentSpec()).files
    assert [after[f"{n}.c"] == before[f"{n}.c"] for n in IN_TREE] == [True] * 4


def test_a_checkout_declares_its_packages_in_pyproject(tmp_path: Path) -> None:
    first, second = fresh_name(), fresh_name()
    write_package(tmp_path, first)
    write_package(tmp_path / "src", second)  # src layout: found under src/
    checkout = write_pyproject(tmp_path, {first: f"pbt_{first}"})
    assert use_flavours([checkout]) == (first,)
    other = tmp_path / "other"
    other.mkdir()
    (other / "src").symlink_to(tmp_path / "src")
    assert use_flavours([write_pyproject(other, {second: f"pbt_{second}"})]) == (first, second)


def test_an_installed_package_is_found_through_its_entry_point(tmp_path: Path) -> None:
    name = fresh_name()
    write_package(tmp_path, name)
    write_distribution(tmp_path, {name: f"pbt_{name}"})
    sys.path.append(str(tmp_path))  # where pip would have put both
    assert flavours.outside() == (name,)
    assert flavours.package(name).origin == f"entry point profbench.flavours:{name}"
    check_outside()


def test_the_environment_names_paths_for_children_and_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = fresh_name(), fresh_name()
    one, two = write_package(tmp_path, first), write_package(tmp_path, second)
    monkeypatch.setenv(PATH_ENV, str(one))  # what a pytest child or xdist worker inherits
    assert flavours.outside() == (first,)
    use_flavours([two])  # the command line adds one: both go to the children
    assert flavours.child_environment()[PATH_ENV] == os.pathsep.join((str(one), str(two)))
    assert os.environ[PATH_ENV] == str(one)  # this process's own is left as it was
    assert flavours.flavour_paths() == (one, two)


def test_adding_a_path_writes_nothing_to_this_process_environment(tmp_path: Path) -> None:
    """Issue 42: an exported path leaked into every later CLI test of an xdist worker."""
    before = {key: value for key, value in os.environ.items() if key.startswith("PROFBENCH_")}
    use_flavours([write_package(tmp_path, fresh_name())])
    after = {key: value for key, value in os.environ.items() if key.startswith("PROFBENCH_")}
    assert after == before


def test_a_child_with_no_paths_searched_gets_no_path_variable(tmp_path: Path) -> None:
    inherited = {"HOME": str(tmp_path), PATH_ENV: "/a/stale/directory"}
    assert flavours.child_environment(inherited) == {"HOME": str(tmp_path)}


def test_the_same_package_found_twice_is_one_flavour(tmp_path: Path) -> None:
    name = fresh_name()
    package = write_package(tmp_path, name)
    write_distribution(tmp_path, {name: f"pbt_{name}"})
    sys.path.append(str(tmp_path))
    assert use_flavours([package]) == (name,)


def test_a_scenario_names_it_as_it_names_an_in_tree_flavour(tmp_path: Path) -> None:
    name = fresh_name()
    use_flavours([write_package(tmp_path, name)])
    path = tmp_path / "s.toml"
    path.write_text(
        f'name = "s"\ndescription = "d"\nseed = 1\n[guest]\ntopology = "1s1cl1c2t"\n'
        f'[agent]\nflavour = "{name}"\npmu_produce = false\n'
        '[[steps]]\nop = "inject"\ncpu = "all"\ncount = 8\n'
        '[[expect]]\nvalue = "percpu.1.x_recorded"\nequals = 8\n'
    )
    scenario = load_scenario(path)
    assert scenario.agent.flavour == name
    path.write_text(path.read_text().replace("x_recorded", "x_nowhere"))
    with pytest.raises(ConfigError, match="x_nowhere"):
        load_scenario(path)
