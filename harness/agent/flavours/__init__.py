"""The registry of agent flavours: the four in the tree, and any found outside it.

Each in-tree flavour lives in ``harness/agent/flavours/<name>/`` (its data, runner,
oracles, report and scenario rules) and ``guest/agent/flavours/<name>/`` (its C
template), and takes one line in `FLAVOURS`. A flavour outside the tree is one Python
package holding the same parts, found through its entry point (group
``profbench.flavours``) or a path (``--flavour-path DIR``, ``PROFBENCH_FLAVOUR_PATH``):
`harness.agent.flavours.discovery`. The core, the renderer, the scenario loader, the
matrix, the mutants and the CLI find every flavour through this registry and never
name one::

    get("dt").percpu_names                  # data: counters, quirks, records, ioctls
    harness.agent.flavour.behaviour("dt")   # behaviour: runner, oracles, report
    names()                   # ('tprof', 'dt', 'kprof', 'hwpmc', ...): the C flavour table's order
    use_paths([Path("~/src/myport")])       # ('myport',): found
    child_environment()       # os.environ plus PROFBENCH_FLAVOUR_PATH, for a child's Popen

This module holds data only: the agent's spec validates against it, and a
flavour's runner depends on the spec (`harness.agent.flavour.behaviour` imports
the behaviour on first use). Flavours outside the tree are searched for on first
use; `harness.agent.external` checks them whole before any guest boots.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.agent.flavours.discovery import (
    PATH_ENV,
    FlavourPackage,
    entry_point_packages,
    in_tree,
    path_packages,
)
from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.tprof.data import TPROF
from harness.agent.values.info import FlavourInfo
from harness.errors import ConfigError, FlavourPackageError
from harness.templates import add_root

#: The in-tree flavours, one line each, in the order the module's flavour table uses.
FLAVOURS: dict[str, FlavourInfo] = {"tprof": TPROF, "dt": DT, "kprof": KPROF, "hwpmc": HWPMC}


class _Outside:
    """The flavours found outside the tree so far, and the directories searched for them."""

    def __init__(self) -> None:
        self.packages: dict[str, FlavourPackage] = {}
        self.paths: list[Path] = []
        self.searched = False


_OUTSIDE = _Outside()


def names() -> tuple[str, ...]:
    """Every flavour's name: the in-tree ones in registry order, then those found outside.

    :raise FlavourPackageError: a flavour package found outside the tree is unusable.
    """
    return (*FLAVOURS, *_found())


def outside() -> tuple[str, ...]:
    """The names of the flavours found outside the tree, in the order found."""
    return tuple(_found())


def get(name: str) -> FlavourInfo:
    """The data of the flavour called ``name``.

    :raise ConfigError: no such flavour; the message lists the known ones.
    """
    return package(name).info


def package(name: str) -> FlavourPackage:
    """Where the flavour called ``name`` keeps its parts (`FlavourPackage`).

    :raise ConfigError: no such flavour; the message lists the known ones.
    """
    if name in FLAVOURS:
        return in_tree(FLAVOURS[name])
    found = _found()
    if name in found:
        return found[name]
    known = ", ".join(sorted((*FLAVOURS, *found)))
    raise ConfigError(f"unknown agent flavour {name!r}; known: {known}")


def known(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` (``--flavour``), each checked to be a flavour's, in the order given.

    :raise ConfigError: a name no flavour has; the message lists the known ones.
    """
    return tuple(package(name).info.name for name in names)


def use_paths(directories: Iterable[Path]) -> tuple[str, ...]:
    """Add the flavours of each directory (``--flavour-path``); the names added.

    Nothing is written to this process's environment: a child (the pytest run a
    command starts, and so its xdist workers) is handed the directories in its own
    environment at its ``Popen`` (`child_environment`).

    :raise FlavourPackageError: a directory holds no usable flavour package, or a name
        that is taken.
    """
    before = set(_found())
    for directory in directories:
        _search_path(directory)
    return tuple(name for name in _OUTSIDE.packages if name not in before)


def flavour_paths() -> tuple[Path, ...]:
    """The directories searched for flavours so far (``--flavour-path``, `PATH_ENV`)."""
    _found()
    return tuple(_OUTSIDE.paths)


def child_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) for a child that finds these flavours.

    `PATH_ENV` names every directory searched so far, or is absent. This is the one
    place the directories reach a child; `use_paths` never exports them, so a test
    that adds a path leaves no trace in later children of its process.
    """
    env = dict(os.environ if base is None else base)
    paths = flavour_paths()
    if paths:
        env[PATH_ENV] = os.pathsep.join(str(path) for path in paths)
    else:
        env.pop(PATH_ENV, None)
    return env


def _found() -> dict[str, FlavourPackage]:
    """The flavours found outside the tree; entry points and `PATH_ENV` searched on first use."""
    if not _OUTSIDE.searched:
        for found in entry_point_packages():
            _add(found)
        for text in os.environ.get(PATH_ENV, "").split(os.pathsep):
            if text.strip():
                _search_path(Path(text.strip()))
        _OUTSIDE.searched = True  # only once all of it was usable: else it raises again
    return _OUTSIDE.packages


def _search_path(directory: Path) -> None:
    resolved = directory.expanduser().resolve()
    for found in path_packages(resolved):
        _add(found)
    if resolved not in _OUTSIDE.paths:
        _OUTSIDE.paths.append(resolved)


def _add(found: FlavourPackage) -> None:
    """Register ``found`` (again: nothing), its template directory a template root.

    :raise FlavourPackageError: its name is an in-tree flavour's or another package's.
    """
    if found.name in FLAVOURS:
        problem = f"its flavour name {found.name!r} is an in-tree flavour's"
        raise FlavourPackageError(found.package, found.origin, problem)
    known = _OUTSIDE.packages.get(found.name)
    if known is not None and known.directory == found.directory:
        return  # the same package, installed and on a path too
    if known is not None:
        problem = f"its flavour name {found.name!r} is taken by {known.package} ({known.origin})"
        raise FlavourPackageError(found.package, found.origin, problem)
    if found.directory is not None:
        add_root(found.name, found.directory)
    _OUTSIDE.packages[found.name] = found
