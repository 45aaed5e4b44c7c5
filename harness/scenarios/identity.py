"""Whether deterministic runs of a scenario reported the same numbers (pure).

A deterministic run (``--deterministic``, ``--record``/``--replay``) promises every number
identical, number by number, except the ones declared in `NOT_DETERMINISTIC`, each with its
reason: a name listed there is shown and kept in the bundle but does not decide
the verdict. There is no tolerance: a number is identical or it differs::

    rows = compare_attempts([first.numbers(), second.numbers()])
    differing(rows)            # [] when the runs agree
    print(format_rows(rows))   # one line per number: values and identical/DIFFERS/excluded
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["identical", "differs", "excluded"]

#: Counter names (the last part of a number's name, e.g. ``core.0.x_nmi_max_ns``) that
#: a deterministic run cannot promise, and why. Empty while every counter repeats:
#: measured on QEMU 7.2, the handler-time counters (``x_nmi_max_ns``, ``x_nmi_sum_ns``,
#: ``x_probe_ns``, ``x_enabled_ns``) read the guest's clock, which under ``-icount
#: shift=0,sleep=off`` is the instruction count, so they repeat too (README, "Deterministic runs").
NOT_DETERMINISTIC: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class NumberRow:
    """One number across runs: its values (None: that run lacked it) and the verdict."""

    name: str
    values: tuple[int | None, ...]
    status: Status
    reason: str = ""


def excluded_reason(
    name: str, not_deterministic: Mapping[str, str] = NOT_DETERMINISTIC
) -> str | None:
    """Why number ``name`` is excluded, or None when it must be identical."""
    return not_deterministic.get(name.rsplit(".", 1)[-1])


def compare_attempts(
    attempts: Sequence[Mapping[str, int]], not_deterministic: Mapping[str, str] = NOT_DETERMINISTIC
) -> tuple[NumberRow, ...]:
    """Every number any run reported, compared across ``attempts`` (sorted by name).

    A number missing from one run differs (unless excluded).
    """
    names = sorted(set().union(*attempts)) if attempts else []
    rows = []
    for name in names:
        values = tuple(attempt.get(name) for attempt in attempts)
        reason = excluded_reason(name, not_deterministic)
        if reason is not None:
            rows.append(NumberRow(name, values, "excluded", reason))
        else:
            same = len(set(values)) == 1 and values[0] is not None
            rows.append(NumberRow(name, values, "identical" if same else "differs"))
    return tuple(rows)


def differing(rows: Sequence[NumberRow]) -> list[NumberRow]:
    """The rows whose numbers differ (excluded ones never do)."""
    return [row for row in rows if row.status == "differs"]


def format_rows(rows: Sequence[NumberRow], headers: Sequence[str]) -> str:
    """A table: number, one column per run (``headers``), and the verdict."""
    width = max((len(row.name) for row in rows), default=6)
    cells = [[str(v) if v is not None else "-" for v in row.values] for row in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
    line = "  ".join(
        (f"{'number':<{width}}", *(f"{h:>{w}}" for h, w in zip(headers, widths, strict=True)))
    )
    out = [line + "  verdict"]
    for row, values in zip(rows, cells, strict=True):
        verdict = {"identical": "identical", "differs": "DIFFERS",
                   "excluded": f"excluded: {row.reason}"}[row.status]  # fmt: skip
        columns = (f"{v:>{w}}" for v, w in zip(values, widths, strict=True))
        out.append("  ".join((f"{row.name:<{width}}", *columns)) + f"  {verdict}")
    return "\n".join(out)


def summary_record(rows: Sequence[NumberRow]) -> dict[str, object]:
    """For bundle.json: counts, and the differing and excluded numbers by name."""
    return {
        "numbers": len(rows),
        "identical": sum(row.status == "identical" for row in rows),
        "differing": {row.name: list(row.values) for row in differing(rows)},
        "excluded": {row.name: row.reason for row in rows if row.status == "excluded"},
    }
