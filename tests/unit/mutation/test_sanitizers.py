"""The sanitizer mutants: each runs on the kernel whose report must catch it."""

from __future__ import annotations

from harness.agent import mutants
from harness.agent.flavour import behaviour
from harness.agent.values.info import SHARED_CASES
from harness.builder.kernels import VARIANT_FRAGMENTS
from harness.mutation.cases import mutant_row
from harness.mutation.sanitizers import SANITIZER_KERNELS, _after_guest_error

#: Which reports each sanitizer kernel can print.
REPORTS = {"debug": {"KASAN", "UBSAN"}, "kcsan": {"KCSAN"}}


def test_every_sanitizer_case_is_a_shared_case_on_a_sanitizer_kernel() -> None:
    assert set(SANITIZER_KERNELS) <= set(SHARED_CASES)
    assert {case.variant for case in SANITIZER_KERNELS.values()} == set(REPORTS)
    assert set(REPORTS) <= set(VARIANT_FRAGMENTS)


def test_every_sanitizer_mutant_is_caught_by_a_report_its_kernel_prints() -> None:
    found = [m for m in mutants.all_mutants() if m.case in SANITIZER_KERNELS]
    assert found  # one per class at least
    for mutant in found:
        variant = SANITIZER_KERNELS[mutant.case].variant
        assert set(mutant.caught_by) <= REPORTS[variant], mutant.name
        assert not mutant.quick, f"{mutant.name}: the sanitizer set runs with --full only"


def test_a_build_the_guest_did_not_live_to_judge_is_a_row_not_caught() -> None:
    """The kcsan guest lost SSH under plain_event_count: its row must not vanish."""
    plain = mutants.get("plain_event_count")
    control = mutant_row(behaviour("dt"), None, [("kcsan", set())])
    rows = _after_guest_error([control], {"dt": (plain,)}, "kcsan", "the kcsan guest: SSH lost")
    assert [(r.mutant, r.verdict) for r in rows] == [("none", "clean"),
                                                     ("plain_event_count", "SURVIVED")]  # fmt: skip
    assert rows[1].failed == ("RUN-ERROR",)
    assert rows[1].notes == ("not judged: the kcsan guest: SSH lost",)
    # A guest lost before its control ran: the control is broken, not missing.
    assert [r.verdict for r in _after_guest_error([], {"dt": (plain,)}, "kcsan", "boot")] == [
        "BROKEN", "SURVIVED"]  # fmt: skip
    # Every build judged: leaving the guest is a note on the last row.
    judged = [control, mutant_row(behaviour("dt"), plain, [("kcsan", {"KCSAN"})])]
    after = _after_guest_error(judged, {"dt": (plain,)}, "kcsan", "the kcsan guest: x")
    assert [r.verdict for r in after] == ["clean", "caught"]
    assert after[1].notes == ("leaving the kcsan guest: x",)
