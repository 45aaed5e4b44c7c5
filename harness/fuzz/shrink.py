"""Shrinking a failing sequence: greedy step deletion, each candidate kept inside the model.

Pure over a predicate: ``fails(steps)`` runs a candidate (in the shell: in the guest)
and says whether it broke the same invariant. Hypothesis's own shrinker replays
every candidate as deterministic, and a guest's reader and timer make some findings
recur only most of the time (Hypothesis ends with ``FlakyFailure``); deletion keeps
whatever failed last, so a miss costs one run, not the search::

    shrunk = shrink(target, steps, fails=lambda s: len(s) >= 2, stop=lambda: False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.fuzz.generate import Target, after, allows, closing, start
from harness.scenarios.types import Step


def normalize(target: Target, steps: Sequence[Step]) -> tuple[Step, ...]:
    """``steps`` without the ones the model no longer allows, closed again.

    Trailing closing steps are dropped first (they are added back as needed).
    """
    facts = start(target)
    kept: list[Step] = []
    for step in steps:
        if allows(target, facts, step):
            kept.append(step)
            facts = after(target, facts, step)
    tail = closing(target, facts)
    while tail and kept[-len(tail) :] == list(tail):
        kept = kept[: -len(tail)]
        facts = start(target)
        for step in kept:
            facts = after(target, facts, step)
        tail = closing(target, facts)
    return (*kept, *tail)


def deletions(target: Target, steps: tuple[Step, ...]) -> list[tuple[Step, ...]]:
    """Shorter candidates: the second half gone, the first half gone, then each step gone."""
    half = len(steps) // 2
    cuts = [steps[:half], steps[half:]] if half > 1 else []
    cuts += [steps[:i] + steps[i + 1 :] for i in range(len(steps))]
    out: list[tuple[Step, ...]] = []
    for cut in cuts:
        candidate = normalize(target, cut)
        if candidate and len(candidate) < len(steps) and candidate not in out:
            out.append(candidate)
    return out


def shrink(
    target: Target,
    steps: tuple[Step, ...],
    fails: Callable[[tuple[Step, ...]], bool],
    stop: Callable[[], bool],
) -> tuple[Step, ...]:
    """The shortest candidate found that still ``fails``, until none does or ``stop()``."""
    best = steps
    improved = True
    while improved and not stop():
        improved = False
        for candidate in deletions(target, best):
            if stop():
                break
            if fails(candidate):
                best, improved = candidate, True
                break
    return best
