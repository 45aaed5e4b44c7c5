"""Quick mutation runs skip a mutant's later cases once every oracle it names failed."""

from __future__ import annotations

from harness.agent import mutants
from harness.mutation.cases import caught

HANDLER_PC = mutants.get("handler_pc")  # caught by MODE and WHERE together


def test_a_mutant_is_caught_only_when_every_oracle_it_names_failed_somewhere() -> None:
    assert set(HANDLER_PC.caught_by) == {"MODE", "WHERE"}
    assert not caught(HANDLER_PC, [("standard", {"MODE"})])  # the exact run still runs
    assert caught(HANDLER_PC, [("standard", {"MODE"}), ("exact", {"WHERE", "IRQ"})])
    assert caught(HANDLER_PC, [("standard", {"MODE", "WHERE"})])
    assert not caught(HANDLER_PC, [("standard", set()), ("exact", {"IRQ"})])
