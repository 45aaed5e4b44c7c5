"""``--flavour NAME``: a run narrowed to the named flavours' tests (``invoke test --flavour``).

A test belongs to a flavour by its ``flavour(name)`` marker. A flavour's own module
marks itself (``pytestmark = [pytest.mark.guest, pytest.mark.flavour("dt")]``); a
shared test over every flavour, in the tree or found outside it, takes its values
from `each`, which marks each one; a matrix cell is marked with its cell's flavour.
With ``--flavour`` (repeatable) every test without a marker for a named flavour is
deselected. The names come checked, from this run's request (tests/runrequest.py:
``invoke test --flavour`` resolves them once, as a pytest run given the option does);
a name that is no flavour's ends the run there, before any guest boots::

    @pytest.mark.parametrize("name", each(flavours.names()))
    def test_every_sample_tells_the_truth(..., name: str) -> None: ...

    pytest tests/guest --cpus 2 --flavour dt --flavour demo   # dt's tests and demo's
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from tests import runrequest

MARK = "flavour"


def each(names: Iterable[str]) -> list[object]:
    """``names`` as parameters, each marked as its flavour's test and named by it."""
    return [pytest.param(name, marks=pytest.mark.flavour(name), id=name) for name in names]


def flavours_of(item: pytest.Item) -> frozenset[str]:
    """The flavours ``item`` is a test of (its ``flavour`` markers)."""
    return frozenset(str(mark.args[0]) for mark in item.iter_markers(MARK))


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only the tests of the request's flavours (``--flavour``; all, when it names none)."""
    names = frozenset(runrequest.of(config).flavours)
    if not names:
        return
    dropped = [item for item in items if not flavours_of(item) & names]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if flavours_of(item) & names]
