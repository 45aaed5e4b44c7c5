"""The sanitizer mutants: each runs on the kernel whose report must catch it."""

from __future__ import annotations

from harness.agent import mutants
from harness.agent.info import SHARED_CASES
from harness.build.kernels import VARIANT_FRAGMENTS
from harness.cli.mutants import SANITIZER_CASES

#: Which reports each sanitizer kernel can print.
REPORTS = {"debug": {"KASAN", "UBSAN"}, "kcsan": {"KCSAN"}}


def test_every_sanitizer_case_is_a_shared_case_on_a_sanitizer_kernel() -> None:
    assert set(SANITIZER_CASES) <= set(SHARED_CASES)
    assert {case.variant for case in SANITIZER_CASES.values()} == set(REPORTS)
    assert set(REPORTS) <= set(VARIANT_FRAGMENTS)


def test_every_sanitizer_mutant_is_caught_by_a_report_its_kernel_prints() -> None:
    found = [m for m in mutants.all_mutants() if m.case in SANITIZER_CASES]
    assert found  # one per class at least
    for mutant in found:
        variant = SANITIZER_CASES[mutant.case].variant
        assert set(mutant.caught_by) <= REPORTS[variant], mutant.name
        assert not mutant.quick, f"{mutant.name}: the sanitizer set runs with --full only"
