"""The registry of agent flavours: adding a flavour is one folder and one line here.

Each flavour lives in ``harness/agent/flavours/<name>/`` (its data, runner, oracles,
report and scenario rules) and ``guest/agent/flavours/<name>/`` (its C template).
The core, the renderer, the scenario loader, the matrix and the CLI find it
through this registry and never name it::

    get("dt").percpu_names                  # data: counters, quirks, records, ioctls
    harness.agent.flavour.behaviour("dt")   # behaviour: runner, oracles, report
    names()                   # ('tprof', 'dt', 'kprof', 'hwpmc'): the C flavour table's order

This module holds data only: the agent's spec validates against it, and a
flavour's runner depends on the spec (`harness.agent.flavour.behaviour` imports
the behaviour on first use).
"""

from __future__ import annotations

from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.tprof.data import TPROF
from harness.agent.module.info import FlavourInfo
from harness.errors import ConfigError

#: The registry: one entry per flavour, in the order the module's flavour table uses.
FLAVOURS: dict[str, FlavourInfo] = {"tprof": TPROF, "dt": DT, "kprof": KPROF, "hwpmc": HWPMC}


def names() -> tuple[str, ...]:
    """Every flavour's name, in registry order."""
    return tuple(FLAVOURS)


def get(name: str) -> FlavourInfo:
    """The data of the flavour called ``name``.

    :raise ConfigError: no such flavour; the message lists the known ones.
    """
    try:
        return FLAVOURS[name]
    except KeyError:
        known = ", ".join(sorted(FLAVOURS))
        raise ConfigError(f"unknown agent flavour {name!r}; known: {known}") from None
