"""Laws: the comparisons every oracle makes, in one typed home.

An oracle states laws over numbers it read from a run (``x_sample = 24``,
``x_inring ≤ 16``, ``x_nested = 0``) and turns each broken one into a
`Violation` that shows what was expected and what was observed. Each helper
returns a list (empty when the law held), so an oracle is a concatenation::

    out = equal("TP-O3", 0, "x_swaps", want=12, got=11, detail="one swap lost")
    out += sums_to("HW-O1", 0, ("x_producer_calls", 40), {"x_logged": 38, "x_dropped": 1}, "")
    out += at_most("HW-O2", 1, "x_inring", bound=16, got=17, detail="ring has 16 slots")
    out += zero("C-2", 2, "x_nmi_locks", got=0, detail="no lock in NMI context")

A law must be able to fail against evidence it does not derive from (style rule
30): these helpers only phrase the comparison; the oracle that calls them says
where its expected number comes from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.agent.values.results import Violation


@dataclass(frozen=True, slots=True)
class Law:
    """One named comparison: ``name`` against ``want`` (shown as ``want_text``)."""

    name: str
    want: int
    got: int
    want_text: str = ""  # how the expected side reads, e.g. "x_filled 12"; default: want

    @property
    def expected(self) -> str:
        """The expected side as the report shows it."""
        return self.want_text or str(self.want)


def equal(oracle: str, cpu: int | None, name: str, *, want: int, got: int,
          detail: str) -> list[Violation]:  # fmt: skip
    """``name = want``; observed shows ``got``."""
    return [] if got == want else [Violation(oracle, cpu, f"{name} = {want}", f"{got}", detail)]


def at_most(oracle: str, cpu: int | None, name: str, *, bound: int, got: int,
            detail: str) -> list[Violation]:  # fmt: skip
    """``name ≤ bound``."""
    if got <= bound:
        return []
    return [Violation(oracle, cpu, f"{name} ≤ {bound}", f"{name} = {got}", detail)]


def at_least(oracle: str, cpu: int | None, name: str, *, bound: int, got: int,
             detail: str) -> list[Violation]:  # fmt: skip
    """``name ≥ bound``."""
    if got >= bound:
        return []
    return [Violation(oracle, cpu, f"{name} ≥ {bound}", f"{name} = {got}", detail)]


def zero(oracle: str, cpu: int | None, name: str, *, got: int, detail: str) -> list[Violation]:
    """``name = 0``."""
    return [] if got == 0 else [Violation(oracle, cpu, f"{name} = 0", f"{name} = {got}", detail)]


def sums_to(
    oracle: str, cpu: int | None, expected: tuple[str, int], terms: Mapping[str, int], detail: str
) -> list[Violation]:
    """``expected`` = the sum of ``terms``; observed names every non-zero term."""
    name, want = expected
    got = sum(terms.values())
    if got == want:
        return []
    nonzero = [f"{k} {v}" for k, v in terms.items() if v]
    text = " + ".join(nonzero) if nonzero else "every term 0"
    return [Violation(oracle, cpu, f"{name} = {want}", f"{text} = {got}", detail)]


def all_equal(oracle: str, cpu: int | None, laws: Iterable[Law], detail: str) -> list[Violation]:
    """Every law's ``got = want``; one violation per broken law."""
    return [
        Violation(oracle, cpu, f"{law.name} = {law.expected}", f"{law.name} = {law.got}", detail)
        for law in laws
        if law.got != law.want
    ]


def all_at_most(oracle: str, cpu: int | None, laws: Iterable[Law], detail: str) -> list[Violation]:
    """Every law's ``got ≤ want``; one violation per broken law."""
    return [
        Violation(oracle, cpu, f"{law.name} ≤ {law.expected}", f"{law.name} = {law.got}", detail)
        for law in laws
        if law.got > law.want
    ]
