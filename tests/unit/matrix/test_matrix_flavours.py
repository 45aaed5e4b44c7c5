"""``--flavour`` on a matrix: the named flavours' cells, one from outside the tree on each guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent.external import use_flavours
from harness.errors import ConfigError
from harness.matrix.load import get_matrix, load_matrices, with_flavours
from tests.unit.agent.packages import fresh_name, isolated_registry, write_package
from tests.unit.matrix.test_matrix import write_matrix

pytestmark = pytest.mark.usefixtures(isolated_registry.__name__)


def test_no_flavour_named_is_the_matrix_itself() -> None:
    quick = get_matrix("quick")
    assert with_flavours(quick, ()) is quick


def test_an_in_tree_flavour_keeps_its_cells_and_its_exclusions() -> None:
    quick = get_matrix("quick")
    narrowed = with_flavours(quick, ("kprof",))
    assert narrowed.cells == tuple(cell for cell in quick.cells if cell.flavour == "kprof")
    assert [cell.topology.name for cell in narrowed.cells] == ["1s1cl1c1t"]  # 8 vCPUs excluded
    assert narrowed.name == quick.name


def test_a_flavour_from_outside_gets_a_cell_on_every_guest(tmp_path: Path) -> None:
    name = fresh_name()
    use_flavours([write_package(tmp_path, name)])
    path = write_matrix(tmp_path, exclude='[{ flavour = "dt", topology = "2s2cl1c2t" }]')
    matrix = load_matrices(path)["m"]
    narrowed = with_flavours(matrix, (name, "dt"))
    guests = dict.fromkeys(cell.guest_key for cell in matrix.cells)
    assert [cell.guest_key for cell in narrowed.cells if cell.flavour == name] == list(guests)
    assert {cell.id for cell in narrowed.cells if cell.flavour == "dt"} == {
        cell.id for cell in matrix.cells if cell.flavour == "dt"
    }
    keys = [cell.guest_key for cell in narrowed.cells]
    assert keys == sorted(keys)  # cells sharing a guest stay adjacent
    assert len(guests) == 4  # 2 topologies, NMI on and off: dt's exclusion is not its


def test_an_unknown_flavour_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown agent flavour 'nope'; known: dt, hwpmc"):
        with_flavours(get_matrix("quick"), ("nope",))
