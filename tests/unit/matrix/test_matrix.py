from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.matrix.load import (
    AXES,
    MATRIX_FILE,
    Cell,
    Matrix,
    get_matrix,
    github_matrix,
    load_matrices,
    select,
)
from harness.vm.topology import CpuTopology

#: A valid one-matrix file, one TOML value per key; tests override or drop keys.
BASE: dict[str, str] = {
    "description": '"a test matrix"',
    "arch": '["arm64"]',
    "topology": '["1s1cl1c1t", "2s2cl1c2t"]',
    "flavour": '["tprof", "dt"]',
    "nmi": '["on", "off"]',
    "accel": '["tcg"]',
    "variant": '["default"]',
}


def write_matrix(tmp_path: Path, **overrides: str | None) -> Path:
    """Write ``[matrix.m]`` from BASE with ``overrides`` (None drops a key)."""
    keys = {**BASE, **overrides}
    lines = ["[matrix.m]", *(f"{key} = {value}" for key, value in keys.items() if value)]
    path = tmp_path / "matrix.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the shipped file ---------------------------------------------------------


def test_shipped_file_loads() -> None:
    matrices = load_matrices()
    assert set(matrices) == {"quick", "full"}
    assert all(m.description and m.cells for m in matrices.values())
    assert MATRIX_FILE.name == "matrix.toml"


def test_quick_has_the_six_nmi_off_cells_the_guest_tier_does_not_run() -> None:
    quick = get_matrix("quick")
    expected = {
        f"arm64-linux6.1-{topo}-{flavour}-nmi_off-tcg-default"
        for topo in ("1s1cl1c1t", "2s2cl1c2t")
        for flavour in ("tprof", "dt", "kprof", "hwpmc")
    } - {
        "arm64-linux6.1-2s2cl1c2t-kprof-nmi_off-tcg-default",  # CI time: excluded
        "arm64-linux6.1-2s2cl1c2t-hwpmc-nmi_off-tcg-default",
    }
    assert len(quick.cells) == 6
    assert {cell.id for cell in quick.cells} == expected
    assert {cell.topology.cpus for cell in quick.cells} == {1, 8}


def test_full_runs_every_cell_on_both_kernels() -> None:
    cells = get_matrix("full").cells
    by_kernel = {k: {c.id.replace(f"-linux{k}-", "-") for c in cells if c.kernel == k}
                 for k in ("6.1", "6.12")}  # fmt: skip
    assert by_kernel["6.1"] == by_kernel["6.12"]
    assert {c.flavour for c in cells if c.kernel == "6.12"} == {"tprof", "dt", "kprof", "hwpmc"}


def test_no_cell_id_is_a_substring_of_another() -> None:
    """``-k CELL`` selects by substring: a 6.1 cell must not also select a 6.12 one."""
    ids = [cell.id for cell in get_matrix("full").cells]
    assert not [(a, b) for a in ids for b in ids if a != b and a in b]


def test_a_matrix_without_a_kernel_axis_runs_61_and_an_unknown_kernel_is_named(
    tmp_path: Path,
) -> None:
    assert {c.kernel for c in get_matrix("m", write_matrix(tmp_path)).cells} == {"6.1"}
    with pytest.raises(ConfigError, match=r"key 'kernel': unknown kernel version '5\.10'"):
        get_matrix("m", write_matrix(tmp_path, kernel='["5.10"]'))


def test_full_honours_every_exclusion() -> None:
    cells = [cell.axes() for cell in get_matrix("full").cells]
    assert not [c for c in cells if c["arch"] == "x86_64" and c["nmi"] == "off"]
    assert not [c for c in cells if c["arch"] == "x86_64" and c["accel"] == "tcg"]
    assert not [c for c in cells if c["arch"] == "arm64" and c["accel"] == "kvm"]
    assert not [c for c in cells if c["variant"] == "debug" and c["topology"] != "2s1cl1c2t"]
    assert not [c for c in cells if c["arch"] == "x86_64" and "2cl" in c["topology"]]


def test_full_keeps_everything_else() -> None:
    full = get_matrix("full")
    # arm64: 5 topologies default + 1 debug + 1 kcsan, ×4 flavours ×2 nmi; x86_64: 3 + 1
    # (no kcsan), ×4 flavours; all of it on both kernels.
    assert len(full.cells) == ((5 + 1 + 1) * 4 * 2 + (3 + 1) * 4) * 2
    values = {axis: {cell.axes()[axis] for cell in full.cells} for axis in AXES}
    assert values["arch"] == {"arm64", "x86_64"}
    assert len(values["topology"]) == 5
    assert values["accel"] == {"tcg", "kvm"}
    assert values["variant"] == {"default", "debug", "kcsan"}
    assert values["kernel"] == {"6.1", "6.12"}


@pytest.mark.parametrize("name", ["quick", "full"])
def test_ids_are_unique(name: str) -> None:
    ids = [cell.id for cell in get_matrix(name).cells]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", ["quick", "full"])
def test_cells_sharing_a_guest_are_adjacent(name: str) -> None:
    cells = get_matrix(name).cells
    keys = [(cell.guest_key, cell.flavour) for cell in cells]
    assert keys == sorted(keys)
    runs = [key for key, _ in groupby(cell.guest_key for cell in cells)]
    assert len(runs) == len(set(runs)), "a guest_key appears in two separate runs"
    # every flavour shares each guest, but where an exclusion drops one of them
    assert all(len(list(group)) in (2, 4) for _, group in groupby(cells, lambda c: c.guest_key))


def test_github_matrix_round_trips_through_json() -> None:
    full = get_matrix("full")
    loaded = json.loads(json.dumps(github_matrix(full)))
    assert loaded == github_matrix(full)
    include = loaded["include"]
    assert [entry["cell"] for entry in include] == [cell.id for cell in full.cells]
    assert all(set(entry) == {"cell", *AXES} for entry in include)
    assert all(isinstance(value, str) for entry in include for value in entry.values())


def test_select_by_keyword() -> None:
    quick = get_matrix("quick")
    assert select(quick, None) == quick.cells
    # kprof and hwpmc NMI-off cells excluded on 8 vCPUs
    assert len(select(quick, "linux6.1-2s2cl1c2t")) == 2
    assert len(select(quick, "linux6.12-")) == 0
    assert [cell.flavour for cell in select(quick, "-dt-")] == ["dt"] * 2
    assert select(quick, "x86_64") == ()


# -- Cell ---------------------------------------------------------------------


def test_cell_id_axes_and_guest_key() -> None:
    cell = Cell("arm64", CpuTopology(2, 2, 1, 2), "tprof", True, "tcg", "default", "6.12")
    assert cell.id == "arm64-linux6.12-2s2cl1c2t-tprof-nmi_on-tcg-default"
    assert cell.guest_key == "arm64-linux6.12-2s2cl1c2t-nmi_on-tcg-default"
    assert cell.axes() == {
        "arch": "arm64",
        "topology": "2s2cl1c2t",
        "flavour": "tprof",
        "nmi": "on",
        "accel": "tcg",
        "variant": "default",
        "kernel": "6.12",
    }
    assert list(cell.axes()) == list(AXES)


def test_qemu_words_are_accepted_and_named_compactly(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, topology='["sockets=2,clusters=2,cores=1,threads=2"]')
    matrix = get_matrix("m", path)
    assert isinstance(matrix, Matrix)
    assert {cell.topology.name for cell in matrix.cells} == {"2s2cl1c2t"}


def test_exclusions_drop_matching_cells(tmp_path: Path) -> None:
    path = write_matrix(
        tmp_path, exclude='[{ nmi = "off", flavour = "dt" }, { topology = "cores=1" }]'
    )
    ids = {cell.id for cell in get_matrix("m", path).cells}
    assert ids == {
        "arm64-linux6.1-2s2cl1c2t-tprof-nmi_on-tcg-default",
        "arm64-linux6.1-2s2cl1c2t-tprof-nmi_off-tcg-default",
        "arm64-linux6.1-2s2cl1c2t-dt-nmi_on-tcg-default",
    }


# -- validation ---------------------------------------------------------------

X86_CLUSTERS = {
    "arch": '["x86_64"]',
    "topology": '["2s2cl1c2t"]',
    "nmi": '["on"]',
    "accel": '["kvm"]',
}


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [
        pytest.param({"colour": '"red"'}, "colour", "unknown key", id="unknown-key"),
        pytest.param({"arch": None}, "arch", "missing", id="missing-axis"),
        pytest.param({"description": "3"}, "description", "non-empty string", id="description"),
        pytest.param({"arch": '"arm64"'}, "arch", "must be a list of strings", id="not-a-list"),
        pytest.param({"nmi": "[true]"}, "nmi", "must be a list of strings", id="not-strings"),
        pytest.param({"flavour": "[]"}, "flavour", "is empty", id="empty-axis"),
        pytest.param({"arch": '["riscv64"]'}, "arch", "unknown arch 'riscv64'", id="arch"),
        pytest.param({"flavour": '["perf"]'}, "flavour", "unknown agent flavour", id="flavour"),
        pytest.param({"variant": '["kasan"]'}, "variant", "unknown kernel variant", id="variant"),
        pytest.param({"accel": '["auto"]'}, "accel", "unknown accel 'auto'", id="accel"),
        pytest.param({"topology": '["2x2"]'}, "topology", "cannot read topology", id="topology"),
        pytest.param({"topology": '["0s1c1t"]'}, "topology", "at least 1", id="topology-zero"),
        pytest.param({"nmi": '["yes"]'}, "nmi", "'on' or 'off'", id="nmi"),
        pytest.param({"flavour": '["dt", "dt"]'}, "flavour", "duplicate value 'dt'", id="dup"),
        pytest.param(
            {"topology": '["1s1cl1c1t", "cores=1"]'},
            "topology",
            "duplicate value 'cores=1' (the same as '1s1cl1c1t')",
            id="dup-topology-spelling",
        ),
        pytest.param({"exclude": '["arm64"]'}, "exclude", "list of tables", id="exclude-type"),
        pytest.param({"exclude": '{ arch = "arm64" }'}, "exclude", "list of tables", id="ex-table"),
        pytest.param({"exclude": "[{}]"}, "exclude[0]", "is empty", id="exclude-empty"),
        pytest.param(
            {"exclude": '[{ nmi = "on" }, { colour = "red" }]'},
            "exclude[1].colour",
            "unknown axis",
            id="exclude-unknown-axis",
        ),
        pytest.param(
            {"exclude": '[{ arch = "x86_64" }]'},
            "exclude[0].arch",
            "'x86_64' is not in this matrix's arch axis",
            id="exclude-value-not-in-axis",
        ),
        pytest.param(
            {"exclude": '[{ nmi = "maybe" }]'}, "exclude[0].nmi", "'on' or 'off'", id="ex-nmi"
        ),
        pytest.param({"exclude": "[{ nmi = true }]"}, "exclude[0].nmi", "string", id="ex-bool"),
        pytest.param(
            {"exclude": '[{ arch = "arm64" }]'}, "exclude", "removes every cell", id="excl-all"
        ),
        pytest.param(
            X86_CLUSTERS, "exclude", "x86_64 guests cannot have clusters", id="cannot-run"
        ),
        pytest.param(
            {**X86_CLUSTERS, "topology": '["1s1c1t"]', "nmi": '["off"]'},
            "exclude",
            "cell x86_64-linux6.1-1s1cl1c1t-tprof-nmi_off-kvm-default cannot run",
            id="cannot-run-nmi-off",
        ),
    ],
)
def test_invalid_matrix_names_file_matrix_key_and_reason(
    tmp_path: Path, overrides: dict[str, str | None], key: str, reason: str
) -> None:
    path = write_matrix(tmp_path, **overrides)
    with pytest.raises(ConfigError) as info:
        load_matrices(path)
    message = str(info.value)
    assert str(path) in message
    assert "matrix 'm'" in message
    assert f"key {key!r}" in message
    assert reason in message


def test_matrix_that_is_not_a_table(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text("[matrix]\nm = 3\n")
    with pytest.raises(ConfigError, match=r"matrix 'm': must be a table"):
        load_matrices(path)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        pytest.param('colour = "red"\n', r"key 'colour': unknown top-level key", id="top-key"),
        pytest.param("", r"key 'matrix': define at least one", id="no-matrix"),
        pytest.param("matrix = 3\n", r"key 'matrix': define at least one", id="matrix-scalar"),
        pytest.param("[matrix.m\n", r"not valid TOML", id="bad-toml"),
    ],
)
def test_invalid_file(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=pattern) as info:
        load_matrices(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=r"cannot read the matrix file"):
        load_matrices(path)


def test_unknown_matrix_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"no matrix 'nightly'; known: quick, full"):
        get_matrix("nightly")


def test_github_matrix_of_selected_cells() -> None:
    quick = get_matrix("quick")
    chosen = select(quick, "nmi_off")
    include = json.loads(json.dumps(github_matrix(quick, chosen)))["include"]
    assert [entry["cell"] for entry in include] == [cell.id for cell in chosen]
    assert {entry["nmi"] for entry in include} == {"off"}
