"""Named test matrices from ``tests/matrix.toml``: validated, expanded, grouped by guest.

A matrix lists the values of each axis (arch, topology, flavour, nmi, accel,
variant, kernel; kernel may be left out: Debian's 6.1) and partial cells to
exclude; its cells are the cartesian product minus the excluded ones, sorted so
that cells sharing a guest are adjacent::

    quick = get_matrix("quick")
    [cell.id for cell in quick.cells]   # ['arm64-linux6.1-1s1cl1c1t-dt-nmi_off-tcg-default', ...]
    select(quick, "2s2cl1c2t")          # the cells whose id contains the keyword
    with_flavours(quick, ("demo",))     # demo's cells on quick's guests (found outside)
    json.dumps(github_matrix(quick))    # {"include": [{"cell": ..., "arch": ...}, ...]}
    github_images(quick)                # each (arch, variant, kernel) the cells boot, once

Everything is checked on load: unknown keys, types, unknown values, duplicates,
exclusions that name nothing, and cells the harness would refuse to start (via
`MachineSpec`, the same check a run makes). Errors are `ConfigError` naming the
file, the matrix, the key and the reason.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness import arches
from harness.agent import flavours
from harness.arches import ACCELS, Accel
from harness.builder.kernel import Variant, check_variant
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.errors import ConfigError
from harness.paths import REPO_ROOT
from harness.tomlfile import read_toml
from harness.vm.argv import MachineSpec
from harness.vm.topology import CpuTopology

MATRIX_FILE = REPO_ROOT / "tests" / "matrix.toml"
#: Axis order: of the cartesian product, of `Cell.axes` and of the id's parts.
AXES: tuple[str, ...] = ("arch", "topology", "flavour", "nmi", "accel", "variant", "kernel")
NMI_WORDS: tuple[str, ...] = ("on", "off")
_MATRIX_KEYS: tuple[str, ...] = ("description", *AXES, "exclude")
#: Axes a matrix may leave out, and the values they then take.
_DEFAULTS: dict[str, list[str]] = {"kernel": [DEFAULT_VERSION]}
_REQUIRED_KEYS: tuple[str, ...] = ("description", *(a for a in AXES if a not in _DEFAULTS))


@dataclass(frozen=True, slots=True)
class Cell:
    """One combination of the axes: one guest plus the agent flavour run in it."""

    arch: str
    topology: CpuTopology
    flavour: str
    nmi: bool
    accel: Accel
    variant: Variant
    kernel: str = DEFAULT_VERSION  # a Debian kernel version (harness.builder.kernels.VERSIONS)

    @property
    def id(self) -> str:
        """Readable test id: ``arm64-linux6.12-2s2cl1c2t-tprof-nmi_on-tcg-default``.

        The kernel comes right after the arch, so no id is a prefix of another's
        (``...-default-linux6.1`` would be one of ``...-default-linux6.12``, and
        ``-k`` selects by substring).
        """
        return "-".join(self._parts(with_flavour=True))

    @property
    def guest_key(self) -> str:
        """Everything that decides the guest (all but the flavour), as one string."""
        return "-".join(self._parts(with_flavour=False))

    def axes(self) -> dict[str, str]:
        """Each axis as the plain string a matrix file uses (topology by name)."""
        return {
            "arch": self.arch,
            "topology": self.topology.name,
            "flavour": self.flavour,
            "nmi": _nmi_word(self.nmi),
            "accel": self.accel,
            "variant": self.variant,
            "kernel": self.kernel,
        }

    def _parts(self, *, with_flavour: bool) -> tuple[str, ...]:
        flavour = (self.flavour,) if with_flavour else ()
        nmi = f"nmi_{_nmi_word(self.nmi)}"
        kernel = f"linux{self.kernel}"
        return (self.arch, kernel, self.topology.name, *flavour, nmi, self.accel, self.variant)


@dataclass(frozen=True, slots=True)
class Matrix:
    """A named, expanded matrix; ``cells`` are sorted by guest, then flavour."""

    name: str
    description: str
    cells: tuple[Cell, ...]


def load_matrices(path: Path = MATRIX_FILE) -> dict[str, Matrix]:
    """Read, validate and expand every matrix in ``path``, by name, in file order.

    :raise ConfigError: unreadable file, bad TOML, or any invalid matrix; the
        message names the file, the matrix, the key and the reason.
    """
    data = read_toml(path, "matrix")
    unknown = sorted(set(data) - {"matrix"})
    if unknown:
        raise ConfigError(
            f"{path}: key {unknown[0]!r}: unknown top-level key; "
            "only [matrix.<name>] tables belong in a matrix file"
        )
    tables = data.get("matrix")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{path}: key 'matrix': define at least one [matrix.<name>] table")
    return {name: _parse_matrix(_Where(path, name), table) for name, table in tables.items()}


def get_matrix(name: str, path: Path = MATRIX_FILE) -> Matrix:
    """The matrix called ``name`` in ``path``.

    :raise ConfigError: as `load_matrices`, or no such matrix (the known names listed).
    """
    matrices = load_matrices(path)
    try:
        return matrices[name]
    except KeyError:
        known = ", ".join(matrices)
        raise ConfigError(f"{path}: no matrix {name!r}; known: {known}") from None


def select(matrix: Matrix, keyword: str | None) -> tuple[Cell, ...]:
    """The cells whose id contains ``keyword``; all of them when it is None."""
    return tuple(cell for cell in matrix.cells if keyword is None or keyword in cell.id)


def with_flavours(matrix: Matrix, names: tuple[str, ...]) -> Matrix:
    """``matrix`` narrowed to the flavours ``names`` (``--flavour``); itself when none.

    A flavour the matrix lists keeps its cells, its exclusions holding; one it does
    not list (found outside the tree, or left out) gets a cell on every guest the
    matrix boots, as a flavour listed there and excluded nowhere would.

    :raise ConfigError: a name no flavour has; the message lists the known ones.
    """
    if not names:
        return matrix
    chosen = flavours.known(names)
    listed = {cell.flavour for cell in matrix.cells}
    guests = {cell.guest_key: cell for cell in matrix.cells}  # one cell per guest
    cells = [cell for cell in matrix.cells if cell.flavour in chosen]
    cells += [dataclasses.replace(cell, flavour=name)
              for name in chosen if name not in listed for cell in guests.values()]  # fmt: skip
    return dataclasses.replace(matrix, cells=_by_guest(cells))


def github_matrix(matrix: Matrix, cells: tuple[Cell, ...] | None = None) -> dict[str, object]:
    """A GitHub Actions ``strategy.matrix`` value: one ``include`` entry per cell.

    Each entry holds ``cell`` (the id) and every axis as a string; the result is
    plain JSON (dump it with `json.dumps`). ``cells`` narrows it, e.g. to
    `select`'s answer; None means all of ``matrix.cells``.
    """
    chosen = matrix.cells if cells is None else cells
    return {"include": [{"cell": cell.id, **cell.axes()} for cell in chosen]}


def github_images(matrix: Matrix, cells: tuple[Cell, ...] | None = None) -> dict[str, object]:
    """The kernels ``cells`` boot, once each, as a GitHub Actions ``strategy.matrix``.

    One ``include`` entry per distinct (arch, variant, kernel): ``image`` names it,
    the rest are `invoke images` options. CI builds each once per push and the cells
    restore it (.github/workflows/matrix.yml).
    """
    chosen = matrix.cells if cells is None else cells
    images = dict.fromkeys((cell.arch, cell.variant, cell.kernel) for cell in chosen)
    return {"include": [{"image": f"{arch}-{variant}-linux{kernel}", "arch": arch,
                         "variant": variant, "kernel": kernel}
                        for arch, variant, kernel in images]}  # fmt: skip


def check_accel(name: str) -> Accel:
    """Validate an accelerator name (``auto`` is a run option, not a matrix value).

    :raise ConfigError: not one of `ACCELS`.
    """
    for accel in ACCELS:
        if name == accel:
            return accel
    raise ConfigError(f"unknown accel {name!r}; use one of: {', '.join(ACCELS)}")


def _check_nmi(word: str) -> str:
    if word not in NMI_WORDS:
        raise ConfigError(f"nmi takes 'on' or 'off', not {word!r}")
    return word


def _nmi_word(nmi: bool) -> str:
    return "on" if nmi else "off"


#: Per axis: text from the file → its canonical string (topologies by name).
_CANONICAL: dict[str, Callable[[str], str]] = {
    "arch": lambda text: arches.get(text).name,
    "topology": lambda text: CpuTopology.parse(text).name,
    "flavour": lambda text: flavours.get(text).name,
    "nmi": _check_nmi,
    "accel": check_accel,
    "variant": check_variant,
    "kernel": lambda text: get_version(text).name,
}


@dataclass(frozen=True, slots=True)
class _Where:
    """Which file and matrix an error is about."""

    path: Path
    matrix: str

    def error(self, key: str | None, reason: str) -> ConfigError:
        where = f"{self.path}: matrix {self.matrix!r}"
        return ConfigError(f"{where}, key {key!r}: {reason}" if key else f"{where}: {reason}")


def _parse_matrix(where: _Where, table: object) -> Matrix:
    if not isinstance(table, dict):
        raise where.error(None, "must be a table: [matrix.<name>] with one key per axis")
    for key in table:
        if key not in _MATRIX_KEYS:
            raise where.error(key, f"unknown key; a matrix takes: {', '.join(_MATRIX_KEYS)}")
    for key in _REQUIRED_KEYS:
        if key not in table:
            raise where.error(key, f"missing; every matrix sets: {', '.join(_REQUIRED_KEYS)}")
    description = table["description"]
    if not isinstance(description, str) or not description.strip():
        raise where.error("description", "must be a non-empty string saying when it runs")
    values = {axis: _axis_values(where, axis, table.get(axis, _DEFAULTS.get(axis)))
              for axis in AXES}  # fmt: skip
    exclusions = _exclusions(where, table.get("exclude", []), values)
    return Matrix(where.matrix, description, _expand(where, values, exclusions))


def _axis_values(where: _Where, axis: str, raw: object) -> tuple[str, ...]:
    """An axis's values in canonical form, in file order."""
    if not isinstance(raw, list) or not all(isinstance(text, str) for text in raw):
        raise where.error(axis, f"must be a list of strings, e.g. {axis} = [...], not {raw!r}")
    if not raw:
        raise where.error(axis, "is empty; list at least one value")
    seen: dict[str, str] = {}  # canonical → as written
    for text in raw:
        value = _canonical(where, axis, axis, text)
        if value in seen:
            same = f" (the same as {seen[value]!r})" if seen[value] != text else ""
            raise where.error(axis, f"duplicate value {text!r}{same}; list each value once")
        seen[value] = text
    return tuple(seen)


def _canonical(where: _Where, axis: str, key: str, text: str) -> str:
    try:
        return _CANONICAL[axis](text)
    except ConfigError as exc:
        raise where.error(key, str(exc)) from exc


def _exclusions(
    where: _Where, raw: object, values: Mapping[str, tuple[str, ...]]
) -> tuple[dict[str, str], ...]:
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise where.error(
            "exclude", f'must be a list of tables, e.g. [{{ arch = "x86_64" }}], not {raw!r}'
        )
    return tuple(_exclusion(where, f"exclude[{i}]", entry, values) for i, entry in enumerate(raw))


def _exclusion(
    where: _Where, key: str, entry: dict[str, object], values: Mapping[str, tuple[str, ...]]
) -> dict[str, str]:
    """One partial cell, canonical; every value must be one the matrix lists."""
    if not entry:
        raise where.error(key, "is empty and would drop every cell; name at least one axis")
    partial: dict[str, str] = {}
    for axis, text in entry.items():
        axis_key = f"{key}.{axis}"
        if axis not in AXES:
            raise where.error(axis_key, f"unknown axis; use one of: {', '.join(AXES)}")
        if not isinstance(text, str):
            raise where.error(axis_key, f"must be a string, not {text!r}")
        value = _canonical(where, axis, axis_key, text)
        if value not in values[axis]:
            listed = ", ".join(values[axis])
            raise where.error(
                axis_key,
                f"{text!r} is not in this matrix's {axis} axis ({listed}); it drops nothing",
            )
        partial[axis] = value
    return partial


def _expand(
    where: _Where, values: Mapping[str, tuple[str, ...]], exclusions: tuple[dict[str, str], ...]
) -> tuple[Cell, ...]:
    """The product in `AXES` order, minus exclusions, sorted by guest then flavour."""
    cells: list[Cell] = []
    for combo in itertools.product(*(values[axis] for axis in AXES)):
        axes = dict(zip(AXES, combo, strict=True))
        if any(all(axes[k] == v for k, v in partial.items()) for partial in exclusions):
            continue
        cell = _cell(axes)
        _check_runnable(where, cell)
        cells.append(cell)
    if not cells:
        raise where.error("exclude", "removes every cell; the matrix would run nothing")
    return _by_guest(cells)


def _by_guest(cells: list[Cell]) -> tuple[Cell, ...]:
    """``cells`` sorted by guest, then flavour: cells that share a guest are adjacent."""
    return tuple(sorted(cells, key=lambda cell: (cell.guest_key, cell.flavour)))


def _cell(axes: Mapping[str, str]) -> Cell:
    """Build a cell from canonical axis strings (already validated)."""
    return Cell(
        arch=axes["arch"],
        topology=CpuTopology.parse(axes["topology"]),
        flavour=axes["flavour"],
        nmi=axes["nmi"] == "on",
        accel=check_accel(axes["accel"]),
        variant=check_variant(axes["variant"]),
        kernel=axes["kernel"],
    )


def _check_runnable(where: _Where, cell: Cell) -> None:
    """Refuse a cell the harness would refuse to start, so CI never gets one."""
    try:
        MachineSpec(
            arch=arches.get(cell.arch), topology=cell.topology, accel=cell.accel, nmi=cell.nmi
        )
    except ConfigError as exc:
        raise where.error(
            "exclude", f"cell {cell.id} cannot run ({exc}); add an exclude entry for it"
        ) from exc
