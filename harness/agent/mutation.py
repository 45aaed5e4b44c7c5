"""Mutation runs, judged: which oracles each deliberately broken agent build tripped.

Pure: the rows a mutation run produces, their verdicts and the table; the runs
themselves (guests, builds) are `harness.cli.mutants`. A mutant is caught when every
oracle it names (`Mutant.caught_by`) failed in at least one of its cases; the
unmutated build (``none``) must pass every case, or no catch means anything::

    rows = (MutantRow("drop_7th_overflow", "tprof", ("IRQ",), ("IRQ",), ("standard",)),)
    print(format_table(rows))
    survivors(rows)                  # [] when every mutant was caught and the control passed
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.agent.mutants import NONE
from harness.agent.oracles.report import align


@dataclass(frozen=True, slots=True)
class MutantRow:
    """One mutant on one flavour: what should catch it, what did, in which cases.

    ``failed`` are the oracles that failed in any of ``cases``; ``notes`` hold what
    else happened (a guest that crashed after the verdict, a case that errored).
    ``unjudged``: every run of the mutant was one its oracle could not judge, by a
    model that reads only the peer's evidence (`harness.agent.peer.counts.stretch_margin`: too
    many PMU periods folded by the emulator); the notes give each run's numbers.
    """

    mutant: str
    flavour: str
    expected: tuple[str, ...]
    failed: tuple[str, ...]
    cases: tuple[str, ...]
    notes: tuple[str, ...] = ()
    unjudged: bool = False

    @property
    def verdict(self) -> str:
        """``caught``, ``SURVIVED`` or ``unjudged`` for a mutant; ``clean``, ``BROKEN``.

        The last two are the control's. ``unjudged`` is never a catch, and never a
        survival either: the host decided it, not the agent (the table's notes say how
        much the emulator folded).
        """
        if self.mutant == NONE:  # a control that could judge nothing is no clean control
            return "BROKEN" if self.failed else ("unjudged" if self.unjudged else "clean")
        caught = bool(self.expected) and set(self.expected) <= set(self.failed)
        if caught:
            return "caught"
        return "unjudged" if self.unjudged else "SURVIVED"

    @property
    def ok(self) -> bool:
        """Whether this row is what it must be (an unjudged row is reported, not failed)."""
        return self.verdict in ("caught", "clean", "unjudged")

    def as_dict(self) -> dict[str, object]:
        """The row as JSON values."""
        return {"mutant": self.mutant, "flavour": self.flavour, "expected": list(self.expected),
                "failed": list(self.failed), "cases": list(self.cases),
                "notes": list(self.notes), "verdict": self.verdict}  # fmt: skip


def merge(
    mutant: str,
    flavour: str,
    expected: Sequence[str],
    cases: Iterable[tuple[str, Iterable[str]]],
    notes: Sequence[str] = (),
    *,
    unjudged: bool = False,
) -> MutantRow:
    """One row from each case's name and the oracles that failed in it."""
    seen: list[str] = []
    names: list[str] = []
    for case, failed in cases:
        names.append(case)
        seen += [oracle for oracle in sorted(failed) if oracle not in seen]
    return MutantRow(mutant, flavour, tuple(expected), tuple(seen), tuple(names), tuple(notes),
                     unjudged)  # fmt: skip


def survivors(rows: Iterable[MutantRow]) -> list[MutantRow]:
    """Rows that are not what they must be: surviving mutants, a control that failed."""
    return [row for row in rows if not row.ok]


def tally(rows: Iterable[MutantRow]) -> str:
    """How many rows got each verdict, in a fixed order: ``96 caught, 8 clean, 1 unjudged``."""
    counted = Counter(row.verdict for row in rows)
    order = ("caught", "clean", "unjudged", "SURVIVED", "BROKEN")
    return ", ".join(f"{counted[v]} {v}" for v in order if counted[v]) or "no rows"


def format_table(rows: Sequence[MutantRow]) -> str:
    """mutant, flavour, cases, expected oracle, oracles that failed, verdict."""
    titles = ("mutant", "flavour", "cases", "must fail", "failed", "verdict")
    cells = [
        (row.mutant, row.flavour, "+".join(row.cases), ",".join(row.expected) or "-",
         ",".join(row.failed) or "-", row.verdict)
        for row in rows
    ]  # fmt: skip
    lines = [line.rstrip() for line in align([titles, *cells])]
    notes = [f"  {row.mutant}/{row.flavour}: {note}" for row in rows for note in row.notes]
    return "\n".join([*lines, *(["notes:", *notes] if notes else [])])
