"""What every flavour's report shares: verdict lines, CPU ranges, aligned columns.

A flavour's report (``harness/agent/flavours/<name>/report.py``) supplies only its
columns and its oracle list::

    verdict_lines(violations, ORACLES, applicable={"TP-O1"})   # PASS/FAIL/skip per oracle
    format_cpus([0, 1, 2, 5])                                   # "0-2,5"
    align([("cpu", "seen"), ("0", "12")])                       # right-aligned columns
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from harness.agent.results import Violation


def verdict_lines(
    violations: Sequence[Violation],
    oracles: Sequence[tuple[str, str]],
    applicable: Collection[str] | None = None,
) -> str:
    """One ``PASS``/``FAIL``/``skip`` line per oracle in ``oracles`` order, violations below.

    Oracles not in ``applicable`` (default: all) show ``skip`` unless they have
    violations; violations of oracles unknown to ``oracles`` are listed last, never dropped.
    """
    known = [name for name, _ in oracles]
    extra = sorted({v.oracle for v in violations} - set(known))
    entries = [*oracles, *((name, "") for name in extra)]
    width = max(len(name) for name, _ in entries)
    lines = []
    for name, description in entries:
        found = [v for v in violations if v.oracle == name]
        if found:
            verdict = "FAIL"
        else:
            verdict = "PASS" if applicable is None or name in applicable else "skip"
        lines.append(f"{verdict}  {name:<{width}}  {description}".rstrip())
        lines += [f"      {v}" for v in found]
    return "\n".join(lines)


def failed_oracles(violations: Iterable[Violation]) -> set[str]:
    """The names of the oracles with at least one violation."""
    return {v.oracle for v in violations}


def format_cpus(cpus: Iterable[int]) -> str:
    """CPU numbers as ranges, ``"0-3,6"``; ``"none"`` when empty."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
    return text or "none"


def decimal(value: float | None) -> str:
    """One decimal, or ``-`` for a value that does not exist."""
    return "-" if value is None else f"{value:.1f}"


def known_sum(values: Iterable[int | None]) -> int | None:
    """The sum of per-CPU numbers for the ``all`` row; None if any CPU lacks one."""
    listed = list(values)
    return None if any(v is None for v in listed) else sum(v or 0 for v in listed)


def percent(part: int, whole: int) -> float | None:
    """``part`` in percent of ``whole``, one decimal; None when ``whole`` is 0."""
    return round(100 * part / whole, 1) if whole else None


def share(part: int, whole: int) -> float | None:
    """``part / whole``, or None when ``whole`` is 0."""
    return part / whole if whole else None


def align(table: Sequence[Sequence[str]]) -> list[str]:
    """Right-align every column to its widest cell, two spaces apart."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
