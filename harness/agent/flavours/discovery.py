"""Flavours that live outside the tree: found by entry point or by path, checked on arrival.

A flavour package is a Python package holding what an in-tree flavour keeps in its
two folders::

    profbench_myport/
        data.py          INFO: its FlavourInfo (counters, quirks, record layouts, mutants)
        flavour.py       FLAVOUR: its harness.agent.flavour.Flavour (runner, oracles, report)
        myport.c.j2      its C, rendered by the bench's renderer beside the core

It declares itself in its ``pyproject.toml``, as a pytest plugin does::

    [project.entry-points."profbench.flavours"]
    myport = "profbench_myport"

Installed (``pip install -e DIR``), `entry_point_packages` finds it. Not installed,
``--flavour-path DIR`` (or ``PROFBENCH_FLAVOUR_PATH``, `PATH_ENV`) names the checkout
and `path_packages` reads the same table from ``DIR/pyproject.toml``, or takes ``DIR``
itself when it is the package::

    path_packages(Path("~/src/myport"))   # (FlavourPackage(info=..., package='profbench_myport'),)

Every part is looked for here, before anything imports the flavour's behaviour; the
first one missing is one `FlavourPackageError` line. The registry
(`harness.agent.flavours`) adds what is found and refuses a name it already has;
`harness.agent.external` checks the rest (behaviour, template, clashes).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.agent.values.info import FlavourInfo
from harness.errors import FlavourPackageError
from harness.templates import ROOT_SEPARATOR

#: The entry-point group a flavour package declares itself in.
GROUP = "profbench.flavours"
#: Directories searched as ``--flavour-path`` is, separated as ``PATH`` is (os.pathsep):
#: how pytest's children and xdist workers find what the command line named.
PATH_ENV = "PROFBENCH_FLAVOUR_PATH"
IN_TREE = "in-tree"
#: A flavour's name is a C identifier's tail (``pa_flavour_<name>``) and a load parameter.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
_PARTS = "a flavour package holds data.py (INFO), flavour.py (FLAVOUR) and <name>.c.j2"


@dataclass(frozen=True, slots=True)
class FlavourPackage:
    """Where one flavour's parts are: its data, its package, its template's directory.

    ``package`` is the import name of the package holding ``data.py`` and
    ``flavour.py``; ``directory`` the folder holding its C template (None: in-tree,
    under ``guest/``); ``origin`` says how it was found, for messages.
    """

    info: FlavourInfo
    package: str
    origin: str
    directory: Path | None = None

    @property
    def name(self) -> str:
        """The flavour's name (``tprof``, ``myport``)."""
        return self.info.name

    @property
    def outside(self) -> bool:
        """Whether it lives outside the tree (found by entry point or path)."""
        return self.directory is not None

    @property
    def template(self) -> str:
        """Its C template as `harness.templates.render` names it."""
        if self.directory is None:
            return self.info.template
        return f"{self.name}{ROOT_SEPARATOR}{self.name}.c.j2"


def in_tree(info: FlavourInfo) -> FlavourPackage:
    """An in-tree flavour's parts: ``harness/agent/flavours/<name>/``, ``guest/agent/...``."""
    return FlavourPackage(info, f"harness.agent.flavours.{info.name}", IN_TREE)


def entry_point_packages() -> tuple[FlavourPackage, ...]:
    """Every installed flavour package (entry-point group `GROUP`), in entry-point order.

    :raise FlavourPackageError: one of them lacks a part (the first problem found).
    """
    found = importlib.metadata.entry_points(group=GROUP)
    return tuple(load_package(ep.module, f"entry point {GROUP}:{ep.name}", ep.name) for ep in found)


def path_packages(directory: Path) -> tuple[FlavourPackage, ...]:
    """The flavour packages of a checkout that is not installed (``--flavour-path DIR``).

    ``DIR/pyproject.toml`` declares them as an installed one would (`GROUP`); without
    that table, ``DIR`` must be the package itself. Either way its parent directory
    (``DIR``, or ``DIR/src`` in a src layout) goes on ``sys.path``, after what is there.

    :raise FlavourPackageError: no such directory, no declaration, or a part missing.
    """
    directory = directory.expanduser().resolve()
    origin = f"--flavour-path {directory}"
    if not directory.is_dir():
        raise FlavourPackageError(directory.name, origin, "no such directory")
    declared = _declared(directory / "pyproject.toml", origin)
    if declared:
        return tuple(
            load_package(module, origin, name, within=_importable(_source_root(directory, module)))
            for name, module in declared.items()
        )
    if (directory / "__init__.py").is_file():
        return (load_package(directory.name, origin, within=_importable(directory.parent)),)
    raise FlavourPackageError(
        directory.name, origin,
        f"no pyproject.toml declaring a [project.entry-points.{GROUP!r}] table, and not "
        "a package itself (no __init__.py)",
    )  # fmt: skip


def load_package(
    module: str, origin: str, declared: str | None = None, *, within: Path | None = None
) -> FlavourPackage:
    """The flavour package importable as ``module``, every part looked for.

    ``declared``: the name its entry point gives it (its data must agree);
    ``within``: the directory it must be imported from (a path found it: an installed
    package of the same name would otherwise be used instead).

    :raise FlavourPackageError: naming the first part missing or wrong.
    """
    directory = _package_directory(module, origin, within)
    for part in ("data.py", "flavour.py"):
        if not (directory / part).is_file():
            raise FlavourPackageError(module, origin, f"no {part} in {directory}: {_PARTS}")
    info = _info(module, origin)
    problem = ""
    template = directory / f"{info.name}.c.j2"
    if not NAME_PATTERN.match(info.name):
        problem = (f"its flavour name {info.name!r} is not lower-case letters, digits and _, "
                   "at most 32, a letter first")  # fmt: skip
    elif declared is not None and declared != info.name:
        problem = f"its entry point is {declared!r} but data.py's INFO names {info.name!r}"
    elif not template.is_file():
        problem = f"no {template.name} in {directory}: its C template (the ops the core calls)"
    if problem:
        raise FlavourPackageError(module, origin, problem)
    return FlavourPackage(info, module, origin, directory)


def _declared(pyproject: Path, origin: str) -> dict[str, str]:
    """Flavour name → module from ``pyproject``'s `GROUP` table ({}: no file or no table)."""
    if not pyproject.is_file():
        return {}
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        problem = f"pyproject.toml is not TOML: {exc}"
        raise FlavourPackageError(pyproject.parent.name, origin, problem) from exc
    table = project.get("entry-points", {}).get(GROUP, {})
    return {str(name): str(value).partition(":")[0].strip() for name, value in table.items()}


def _source_root(directory: Path, module: str) -> Path:
    """Where ``module``'s top package lies in a checkout: ``DIR/src`` or ``DIR``."""
    top = module.partition(".")[0]
    src = directory / "src"
    return src if (src / top).is_dir() or (src / f"{top}.py").is_file() else directory


def _importable(root: Path) -> Path:
    """Put ``root`` on ``sys.path`` (last: never ahead of what is installed); ``root``."""
    if str(root) not in sys.path:
        sys.path.append(str(root))
        importlib.invalidate_caches()
    return root


def _package_directory(module: str, origin: str, within: Path | None) -> Path:
    """The directory of package ``module``, imported from ``within`` when given."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise FlavourPackageError(module, origin, f"cannot be looked up: {exc}") from exc
    if spec is None or not spec.submodule_search_locations:
        raise FlavourPackageError(module, origin, "no package of that name can be imported")
    directory = Path(next(iter(spec.submodule_search_locations))).resolve()
    if within is not None and not directory.is_relative_to(within.resolve()):
        problem = f"the package of that name imports from {directory}, not {within}: rename one"
        raise FlavourPackageError(module, origin, problem)
    return directory


def _info(module: str, origin: str) -> FlavourInfo:
    """``module.data.INFO``, which must be a `FlavourInfo`."""
    try:
        data = importlib.import_module(f"{module}.data")
    except Exception as exc:  # the package's own code: whatever it raises is its problem
        raise FlavourPackageError(
            module, origin, f"data.py does not import: {type(exc).__name__}: {exc}"
        ) from exc
    info = getattr(data, "INFO", None)
    if not isinstance(info, FlavourInfo):
        what = "no INFO" if info is None else f"an INFO that is a {type(info).__name__}"
        raise FlavourPackageError(module, origin, f"data.py has {what}, not a FlavourInfo")
    return info
