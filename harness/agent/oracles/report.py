"""What every flavour's report shares: verdicts, CPU ranges, columns, rows, matrix cells.

A flavour's report (``harness/agent/flavours/<name>/report.py``) supplies only its
columns and its oracle list::

    verdict_lines(violations, ORACLES, applicable={"TP-O1"})   # PASS/FAIL/skip per oracle
    verdict_lines(violations, HWPMC_ORACLES, reproduces=HW_D2)     # XFAIL: the seed's defect
    verdict_lines(violations, ORACLES, judged=[Judged("IRQ", 812, "PMU interrupts")])
    unjudged(judged, ("WHERE", "WHO"))        # why a relied-on oracle compared nothing
    format_cpus([0, 1, 2, 5])                                   # "0-2,5"
    total_row(DtRow, rows, seq=None)                            # the ``all`` row
    CellRow.from_core(0, core, irq=12, recorded=12, drops={})   # one CPU of a matrix cell

A table row mixes in `OverflowShares` for its ``nmi%`` and ``deliv%`` columns.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from harness.agent.values.results import UNJUDGED, Judged, Violation

_Row = TypeVar("_Row")


@dataclasses.dataclass(frozen=True, slots=True)
class SeedDefect:
    """What a quirk run must show: the seed's defect, reproduced as intended.

    ``must_fail`` are the oracles the defect breaks (one that holds means the quirk
    did not reproduce it: the real failure); ``may_fail`` those it can break too,
    depending on timing::

        SeedDefect("HW-D2", frozenset({"HW-O8"}), may_fail=frozenset({"HW-O4"}))
    """

    defect: str
    must_fail: frozenset[str]
    may_fail: frozenset[str] = frozenset()

    def problems(self, violations: Iterable[Violation]) -> list[str]:
        """Why the run does not reproduce the defect as the seed does; [] when it does."""
        failed = failed_oracles(violations)
        held = [
            f"{name} held: {self.defect} did not show" for name in sorted(self.must_fail - failed)
        ]
        other = sorted(failed - self.must_fail - self.may_fail)
        return held + [f"{name} failed: {self.defect} does not break it" for name in other]


def verdict_lines(
    violations: Sequence[Violation],
    oracles: Sequence[tuple[str, str]],
    applicable: Collection[str] | None = None,
    reproduces: SeedDefect | None = None,
    judged: Sequence[Judged] | None = None,
) -> str:
    """One ``PASS``/``FAIL``/``UNJUDGED``/``skip`` line per oracle in ``oracles`` order.

    Violations follow their oracle's line. Oracles not in ``applicable`` (default:
    all) show ``skip`` unless they have violations; violations of oracles unknown to
    ``oracles`` are listed last, never dropped. With ``judged`` (what each oracle
    compared, `Judged`), a held oracle says ``PASS (n=412 samples)`` only when every
    part of it compared something, and ``UNJUDGED`` with the reason when a part
    compared nothing or no count was given for it: a law that held over nothing
    passed nothing. In a quirk run (``reproduces``) an oracle its defect breaks shows
    ``XFAIL`` with ``(HW-D2 reproduced, as the seed does)``, and one it must break
    but that held shows ``FAIL`` with ``(HW-D2 did not show)``.
    """
    known = [name for name, _ in oracles]
    extra = sorted({v.oracle for v in violations} - set(known))
    entries = [*oracles, *((name, "") for name in extra)]
    width = max(len(name) for name, _ in entries)
    rows = []
    for name, description in entries:
        found = [v for v in violations if v.oracle == name]
        verdict, note = _verdict(name, bool(found), applicable, reproduces)
        if verdict == "PASS" and judged is not None:
            verdict, note = _counted(name, judged)
        rows.append((verdict, name, description, note, found))
    word = max(5 if reproduces else 4, *(len(row[0]) for row in rows))
    lines = []
    for verdict, name, description, note, found in rows:
        text = f"{verdict:<{word}}  {name:<{width}}  {description}".rstrip()
        lines.append(f"{text}  ({note})" if note else text)
        lines += [f"      {v}" for v in found]
    return "\n".join(lines)


def _counted(name: str, judged: Sequence[Judged]) -> tuple[str, str]:
    """A held oracle's word and note from what it compared: PASS or UNJUDGED."""
    parts = [j for j in judged if j.oracle == name]
    if not parts:
        return UNJUDGED, "no count of what it compared"
    note = "; ".join(str(part) for part in parts)
    compared = [part for part in parts if not part.unmodelled]  # no model here: not relied on
    return ("PASS" if compared and all(p.judged for p in compared) else UNJUDGED), note


def unjudged(
    judged: Sequence[Judged], relied: Iterable[str] | None = None, *, cores_shared: bool = False
) -> list[str]:
    """Why each oracle of ``relied`` judged nothing in a run ([] when each compared something).

    A guest test names the oracles it relies on (None: every oracle ``judged`` names,
    i.e. every applicable one); one that has no count, or a part that compared
    nothing, fails the test as surely as a violation would. ``cores_shared``: the
    guest's vCPUs outnumber the host's cores (`vcpus_share_cores`), and the parts whose
    population shrinks with a vCPU's share of a core (`Judged.shares_cpu`) are not
    relied on. Nor is a part with no model of this guest's kernel (`Judged.unmodelled`),
    though an oracle all of whose parts are such judged nothing.
    """
    names = list(dict.fromkeys(j.oracle for j in judged)) if relied is None else list(relied)
    problems = []
    for name in names:
        parts = [j for j in judged if j.oracle == name]
        if not parts:
            problems.append(f"{name} UNJUDGED: no count of what it compared")
        problems += [f"{name} UNJUDGED: {part}" for part in parts
                     if not part.judged and not part.unmodelled
                     and not (cores_shared and part.shares_cpu)]  # fmt: skip
        if parts and all(part.unmodelled for part in parts):
            problems.append(f"{name} UNJUDGED: no part has a model of this kernel")
    return problems


def vcpus_share_cores(vcpus: int) -> bool:
    """Whether a guest of ``vcpus`` has more vCPUs than this host has cores."""
    return vcpus > (os.cpu_count() or 1)


def _verdict(name: str, failed: bool, applicable: Collection[str] | None,
             reproduces: SeedDefect | None) -> tuple[str, str]:  # fmt: skip
    """An oracle's verdict word, and the note a quirk run adds to it ("" for none)."""
    if reproduces is not None:
        defect = reproduces.defect
        if failed and name in reproduces.must_fail | reproduces.may_fail:
            return "XFAIL", f"{defect} reproduced, as the seed does"
        if not failed and name in reproduces.must_fail:
            return "FAIL", f"{defect} did not show: the quirk run must reproduce it"
    if failed:
        return "FAIL", ""
    return ("PASS" if applicable is None or name in applicable else "skip"), ""


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


def nmi_percent(nmi_ok: int, seen: int) -> float | None:
    """Overflows handled in NMI, in percent (1 decimal); None without overflows."""
    return percent(nmi_ok, seen)


def delivered_percent(seen: int, undelivered: int) -> float | None:
    """Periods that arrived as overflows, in percent of those due; None if none were."""
    return percent(seen, seen + undelivered)


class OverflowShares:
    """The ``nmi%`` and ``deliv%`` of a table row, mixed into a flavour's row dataclass.

    The row has ``seen`` (the core's overflows), ``nmi_ok`` (those handled in NMI)
    and ``undelivered`` (periods the emulator never raised as an overflow in time:
    reported with the delivered share, never accounted).
    """

    __slots__ = ()
    seen: int
    nmi_ok: int
    undelivered: int

    @property
    def nmi_pct(self) -> float | None:
        """Overflows handled in NMI, in percent (1 decimal); None without overflows."""
        return nmi_percent(self.nmi_ok, self.seen)

    @property
    def delivered_pct(self) -> float | None:
        """Periods that arrived as overflows, in percent of those due; None if none were."""
        return delivered_percent(self.seen, self.undelivered)


def total_row(kind: type[_Row], rows: Iterable[_Row], **kept: Any) -> _Row:
    """The ``all`` row of per-CPU ``rows`` (dataclasses of ``kind``): ``cpu`` None.

    An ``int`` field is summed; an ``int | None`` one too, or None when a CPU lacks
    it (`known_sum`); every other field (a maximum, a per-CPU number, a tuple) is
    given in ``kept``.

    :raise TypeError: a field that cannot be summed is not in ``kept``.
    """
    listed = tuple(rows)
    values: dict[str, Any] = {"cpu": None, **kept}
    for field in dataclasses.fields(kind):  # type: ignore[arg-type]
        if field.name in values:
            continue
        column = (getattr(row, field.name) for row in listed)
        if field.type in ("int", int):
            values[field.name] = sum(column)
        elif field.type in ("int | None", int | None):
            values[field.name] = known_sum(column)
        else:
            raise TypeError(f"{kind.__name__}.{field.name} ({field.type}) has no sum: keep it")
    return kind(**values)


@dataclasses.dataclass(frozen=True, slots=True)
class CellRow:
    """One CPU of a matrix cell (`Flavour.cell_rows`), as `harness.matrix.report` reads it.

    ``overflows`` and ``undelivered`` are the core's; ``recorded`` and ``drops``
    (cause → count, the flavour's own names) the flavour's; ``irq`` the guest
    kernel's PMU interrupts (None: not read); ``nmi_share`` the share of overflows
    taken in NMI (None: no overflow).
    """

    cpu: int
    irq: int | None
    overflows: int
    recorded: int
    undelivered: int
    drops: Mapping[str, int]
    nmi_share: float | None

    @classmethod
    def from_core(cls, cpu: int, core: Mapping[str, int], *, irq: int | None, recorded: int,
                  drops: Mapping[str, int]) -> CellRow:  # fmt: skip
        """The row of ``cpu`` from its core counters (the ``nmi`` file) and the flavour's."""
        seen = core.get("x_nmi_total", 0)
        return cls(cpu=cpu, irq=irq, overflows=seen, recorded=recorded,
                   undelivered=core.get("x_periods_undelivered", 0), drops=dict(drops),
                   nmi_share=share(core.get("x_nmi_ctx_ok", 0), seen))  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        """The row as the matrix summary's JSON holds it."""
        return {"cpu": self.cpu, "irq": self.irq, "overflows": self.overflows,
                "recorded": self.recorded, "undelivered": self.undelivered,
                "drops": dict(self.drops), "nmi_share": self.nmi_share}  # fmt: skip
