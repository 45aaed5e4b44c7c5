"""A pure function's last results, found again by the identity of its one argument.

A run is judged by several callers that each ask for the same thing of the same frozen
value: ``check``, ``judged`` and ``report`` each read ``run.content()``, and
`harness.agent.oracles.content` asks CHAIN's frame law of one view from ``check``,
``judged`` and the report's numbers. Measured before this (kprof's standard run with a
continuous reader, 8 vCPUs): four frame verdicts of 1.75 s each and four views of 0.3 s
each for one run. `by_identity` keeps the last `KEEP` arguments alive with their results,
so an argument is found by ``is``, never by hashing or comparing a run's samples::

    @by_identity
    def frame_verdict(view: ContentView) -> FrameVerdict: ...

Only for functions of frozen values (a frozen dataclass all the way down): a result is
never recomputed for an argument that is still the same object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

_A = TypeVar("_A")
_R = TypeVar("_R")

#: Arguments kept with their results: a run and its view are judged before the next is made.
KEEP = 2


def by_identity(function: Callable[[_A], _R]) -> Callable[[_A], _R]:
    """``function`` with its results for its last `KEEP` arguments, found by identity."""
    kept: list[tuple[_A, _R]] = []

    @functools.wraps(function)
    def remembered(argument: _A) -> _R:
        for seen, result in kept:
            if seen is argument:
                return result
        result = function(argument)
        kept.insert(0, (argument, result))
        del kept[KEEP:]
        return result

    return remembered
