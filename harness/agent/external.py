"""Flavours from outside the tree, checked whole before any guest boots.

The registry (`harness.agent.flavours`, `harness.agent.flavours.discovery`) finds a
flavour package and makes sure its parts are there; this makes sure they fit: its
behaviour imports and is a `harness.agent.flavour.Flavour` over its own data, its C
template renders beside the core, and nothing it declares is already the core's or
another flavour's (flavour id, record layouts, counters, ioctls, fault points, load
parameters, mutants). Each problem is one `FlavourPackageError` line::

    use_flavours([Path("~/src/myport")])   # --flavour-path: ('myport',), found and checked
    check_outside()                        # what entry points and PROFBENCH_FLAVOUR_PATH found
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from harness.agent import flavours, mutants
from harness.agent.flavour import behaviour
from harness.agent.module.render import CORE_PARAMS, render_agent, render_flavour
from harness.agent.module.spec import AgentSpec
from harness.agent.values.info import CORE_PERCPU, FlavourInfo
from harness.errors import ConfigError, FlavourPackageError

#: What a flavour declares that must be its own: (what it is, its values in a flavour).
_OWN: tuple[tuple[str, Callable[[FlavourInfo], Iterable[object]]], ...] = (
    ("flavour id", lambda info: (info.flavour_id,)),
    ("record layout", lambda info: (layout.c_name for layout in info.layouts)),
    ("decoder class", lambda info: (layout.py_name for layout in info.layouts)),
    ("framed record type", lambda info: (record.type_id for record in info.framed)),
    ("ioctl", lambda info: (ioctl.name for ioctl in info.ioctls)),
    ("fault point", lambda info: info.fault_points),
    ("load parameter", lambda info: (param.name for param in info.params)),
    ("mutant", lambda info: (mutant.name for mutant in info.mutants)),
)


def use_flavours(directories: Iterable[Path]) -> tuple[str, ...]:
    """Add the flavours in ``directories`` (``--flavour-path``) and check every outside one.

    Returns the names of all flavours found outside the tree.

    :raise FlavourPackageError: one of them is unusable (the first problem found).
    """
    flavours.use_paths(directories)
    check_outside()
    return flavours.outside()


def check_outside() -> None:
    """Check every flavour found outside the tree: clashes, behaviour, template.

    Renders each one's template alone, then the whole agent with it active.

    :raise FlavourPackageError: naming the package, where it was found and the problem.
    """
    for name in flavours.outside():
        found = flavours.package(name)
        _check_own(found.info, found.package, found.origin)
        behaviour(name)
        spec = AgentSpec(flavour=name)
        for part, render in (("its template", render_flavour), ("the agent with it", render_agent)):
            try:
                render(spec)
            except ConfigError as exc:
                problem = f"{part} does not render: {exc}"
                raise FlavourPackageError(found.package, found.origin, problem) from exc


def _check_own(info: FlavourInfo, package: str, origin: str) -> None:
    """:raise FlavourPackageError: ``info`` declares something another flavour or the core has."""
    others = [flavours.get(name) for name in flavours.names() if name != info.name]
    taken: dict[tuple[str, object], str] = {("load parameter", p): "the core" for p in CORE_PARAMS}
    taken |= {("mutant", m.name): "the core" for m in mutants.CORE_MUTANTS}
    for other in others:
        taken |= {(what, value): other.name for what, values in _OWN for value in values(other)}
    for what, values in _OWN:
        for value in values(info):
            owner = taken.get((what, value))
            if owner is not None:
                raise FlavourPackageError(package, origin, f"its {what} {value!r} is {owner}'s")
    _check_counters(info, package, origin)


def _check_counters(info: FlavourInfo, package: str, origin: str) -> None:
    """:raise FlavourPackageError: a counter of ``info`` is the core's or an in-tree seed's.

    A run's numbers name the core's per-CPU counters and the flavour's in one space
    (``percpu.3.x_producer_calls``), and the oracles read them by name: a port's
    ``x_producer_calls`` would be read as the core's. A seed's own counter (dt's
    ``dc_dropevt``, tprof's ``sample``) means that seed's statistic, one word for one
    meaning. The bench's ``x_`` names (``x_recorded``, ``x_inring``, ``x_bytes_read``)
    are a vocabulary the flavours share, scaffolded ports included.
    """
    taken = {name: "the core" for name, _ in CORE_PERCPU}
    for name, other in flavours.FLAVOURS.items():
        taken |= {counter: name for counter in (*other.stat_names, *other.percpu_names)
                  if not counter.startswith("x_")}  # fmt: skip
    for counter in (*info.stat_names, *info.percpu_names):
        if counter in taken:
            problem = f"its counter {counter!r} is {taken[counter]}'s"
            raise FlavourPackageError(package, origin, problem)
