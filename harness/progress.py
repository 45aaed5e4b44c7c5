"""How far a long step is, and about how long it has left: pure arithmetic and wording.

A step reports how many of its units are done (kernel objects compiled, rootfs
stages, tests or matrix cells) against an expected total, and where the
expectation comes from, so a person can tell an estimate from a measurement::

    line = format_progress(Progress(done=412, total=828, elapsed_s=95.0,
                                    basis="count of the previous arm64 default build"))
    # '412/828 steps (49%), about 1 min 36 s left (count of the previous arm64 default build)'

The time left is the pace so far times the units left (rough early on, better as
the step runs), or, for steps whose units differ in length, what an earlier run
took minus the time spent (``expected_s``). A total that is exceeded is said to
be so, never shown as more than 100 %.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """A long step, part way."""

    done: int
    total: int | None  # expected units; None when nothing is known
    elapsed_s: float
    basis: str = ""  # where the expectation comes from, shown in parentheses
    unit: str = "steps"
    expected_s: float | None = None  # the whole step's expected time, when units differ


def remaining_s(progress: Progress) -> float | None:
    """Seconds left: the expected time minus the time spent, or the pace so far.

    None when that cannot be said: nothing done yet, no total, the total reached,
    or the expected time already spent.
    """
    if progress.expected_s is not None:
        left = progress.expected_s - progress.elapsed_s
        return left if left > 0 else None
    total, done = progress.total, progress.done
    if total is None or done <= 0 or done >= total:
        return None
    return progress.elapsed_s / done * (total - done)


def format_duration(seconds: float) -> str:
    """``45 s``, ``4 min 41 s``, ``1 h 02 min``: whole units, for a person."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def format_progress(progress: Progress) -> str:
    """One line: the fraction, the percentage and the time left, with their basis."""
    done, total, unit = progress.done, progress.total, progress.unit
    basis = f" ({progress.basis})" if progress.basis else ""
    if total is None or total <= 0:
        return f"{done} {unit}"
    if done == total:
        return f"{done}/{total} {unit} (100%){basis}"
    if done > total:
        return f"{done} {unit}, more than the {total} expected{basis}: no estimate"
    if (left := remaining_s(progress)) is not None:
        eta = f"about {format_duration(left)} left"
    elif progress.expected_s is not None:
        eta = f"longer than the {format_duration(progress.expected_s)} expected"
    else:
        eta = "no estimate yet"
    return f"{done}/{total} {unit} ({100 * done // total}%), {eta}{basis}"


def report_points(total: int, *, reports: int = 10) -> frozenset[int]:
    """The done-counts at which to report: about ``reports`` of them, before the end.

    For a run of many short units (tests, cells) a line per unit would drown
    the output; one every tenth is enough to see the pace. At the end there is
    nothing left to wait for.
    """
    step = max(1, total // reports)
    return frozenset(range(step, total, step))


def report_now(done: int, total: int, elapsed_s: float, *, quiet_s: float = 60.0) -> bool:
    """Whether a run of ``total`` units should say how far it is after ``done`` of them.

    At `report_points` only, and only once the run has lasted ``quiet_s``: a run
    of seconds (the unit tier) has nothing to wait for.
    """
    return elapsed_s >= quiet_s and done in report_points(total)
