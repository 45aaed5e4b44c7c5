"""Where a test's time goes: the harness's stages, timed where they run, summed per process.

A stage is timed exclusively: time spent in a stage opened inside another counts
for the inner one only, so the stages of a test add up to at most its duration
(the rest is pytest, fixtures and everything not marked)::

    with stage(PERF):                      # perf's start, stop and copy in the guest
        start_perf(shell, session)
    @timed(BUILD)                          # every call of build_agent counts as a build
    def build_agent(...): ...
    before = totals()
    ...                                    # a test
    spent = since(before)                  # {"perf": 4.2, "runs": 12.5, ...}
    lines = format_budget(tests)           # the table `invoke test` prints at its end

The totals live in this process (one per xdist worker); the guest tier's conftest
carries each test's share to the controller, which prints `format_budget`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_T = TypeVar("_T")

BOOT = "boot/restore"  # a guest booted cold or restored from its snapshot, and checked
BUILD = "agent builds"  # rendering and building the agent (or finding it cached)
RUNS = "runs"  # the agent's load, profctl sequences and unload in the guest
PERF = "perf"  # Linux perf in the guest (record start and stop) and the copy of its file
ANALYSIS = "host analysis"  # host perf reading that file, symbolising, folding, judging
#: The emulator's witness attached (`harness.agent.witnessed`): its run, each overflow a gdb
#: stop, counts here whole, the runs inside it included (`ABSORBING`).
WITNESS = "witness"
STAGES = (BOOT, BUILD, RUNS, PERF, ANALYSIS, WITNESS)
#: Stages that keep the time of every stage opened inside them: a witnessed run is the
#: witness's cost, not a run's.
ABSORBING = frozenset({WITNESS})
#: Stages whose cost the budget also gives per 1000 of what they handled (`tally`): the
#: witness's, per overflow it saw.
UNITS = {WITNESS: "overflows"}
OTHER = "other"


def tally_key(name: str) -> str:
    """The key `totals` and `since` give the count `tally` kept for stage ``name``."""
    return f"{name} {UNITS[name]}"


_totals: dict[str, float] = {**dict.fromkeys(STAGES, 0.0),
                             **{tally_key(name): 0.0 for name in UNITS}}  # fmt: skip
_open: list[str] = []  # the stages open now, the innermost last
_resumed: list[float] = []  # when each began counting again (an inner one closed)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the block's time for ``name``, none of it for a stage it was opened in.

    Inside an `ABSORBING` stage, the block counts for that stage instead.

    :raise ValueError: ``name`` is not one of `STAGES`.
    """
    if name not in _totals:
        raise ValueError(f"unknown stage {name!r}: one of {', '.join(STAGES)}")
    name = next((open_ for open_ in _open if open_ in ABSORBING), name)
    now = time.monotonic()
    if _open:
        _count(now)
    _open.append(name)
    _resumed.append(now)
    try:
        yield
    finally:
        now = time.monotonic()
        _count(now)
        _open.pop()
        _resumed.pop()
        if _resumed:
            _resumed[-1] = now  # the enclosing stage counts on from here


def timed(name: str) -> Callable[[Callable[_P, _T]], Callable[_P, _T]]:
    """A decorator: every call of the function counts for stage ``name`` (`stage`)."""

    def wrap(function: Callable[_P, _T]) -> Callable[_P, _T]:
        @functools.wraps(function)
        def timed_call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            with stage(name):
                return function(*args, **kwargs)

        return timed_call

    return wrap


def _count(now: float) -> None:
    """Add the innermost open stage's time up to ``now``; it counts on from ``now``."""
    _totals[_open[-1]] += now - _resumed[-1]
    _resumed[-1] = now


def tally(name: str, count: int) -> None:
    """Count ``count`` more of what stage ``name`` handled (its `UNITS`: overflows witnessed).

    :raise ValueError: ``name`` has no unit.
    """
    if name not in UNITS:
        raise ValueError(f"stage {name!r} counts nothing: one of {', '.join(UNITS)}")
    _totals[tally_key(name)] += count


def totals() -> dict[str, float]:
    """Seconds per stage in this process so far (an open stage up to its last change).

    And each `tally` under its `tally_key`.
    """
    return dict(_totals)


def since(before: Mapping[str, float]) -> dict[str, float]:
    """Seconds per stage and tallies since ``before`` (a `totals`), those that grew only."""
    now = totals()
    return {
        name: now[name] - before.get(name, 0.0) for name in now if now[name] > before.get(name, 0.0)
    }


@dataclass(frozen=True, slots=True)
class TimedTest:
    """One test's wall time (setup, call, teardown) and its stages' share of it."""

    nodeid: str
    duration_s: float
    stages: tuple[tuple[str, float], ...]  # (stage, seconds), `STAGES` order


def format_budget(tests: list[TimedTest], *, slowest: int = 5) -> list[str]:
    """The time budget: seconds per stage over ``tests`` and their share, then the slowest.

    "other" is each test's duration less its stages (pytest, fixtures, unmarked work).
    """
    total = sum(t.duration_s for t in tests)
    if not tests or total <= 0:
        return []
    spent = {name: sum(dict(t.stages).get(name, 0.0) for t in tests) for name in STAGES}
    spent[OTHER] = max(0.0, total - sum(spent.values()))
    lines = [f"{len(tests)} tests, {total:.1f} s of test time"]
    for name, secs in spent.items():
        line = f"  {name:<14} {secs:8.1f} s  {100 * secs / total:5.1f} %"
        if name in UNITS and (n := sum(dict(t.stages).get(tally_key(name), 0) for t in tests)):
            line += f"  ({1000 * secs / n:.1f} s per 1000 {UNITS[name]}: {n:.0f})"
        lines.append(line)
    lines.append(f"slowest {min(slowest, len(tests))}:")
    for test in sorted(tests, key=lambda t: -t.duration_s)[:slowest]:
        parts = ", ".join(f"{name} {secs:.1f}" for name, secs in test.stages
                          if name in STAGES and secs >= 0.05)  # fmt: skip
        lines.append(
            f"  {test.duration_s:7.1f} s  {test.nodeid}" + (f"  ({parts})" if parts else "")
        )
    return lines
