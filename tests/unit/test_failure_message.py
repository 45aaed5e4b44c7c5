"""A failed run's assertion names each failing oracle once, its numbers once (issue 44)."""

from __future__ import annotations

from harness.agent.oracles.report import unjudged, verdict_lines
from harness.agent.values.results import Judged, Violation
from harness.ktap import relied_on
from tests.guest.verdicts import failure_message

ORACLES = (("WHERE", "samples where the workload ran"), ("WHO", "whose samples"),
           ("IRQ", "overflows"))  # fmt: skip


def test_each_violation_and_each_unjudged_reason_appears_once() -> None:
    violations = [Violation("WHERE", 1, "at least 40 samples in leaf", "12")]
    judged = [Judged("WHERE", 50, "samples"), Judged("WHO", 0, "samples", why="none recorded"),
              Judged("IRQ", 8, "overflows")]  # fmt: skip
    report = "cpu seen\n  1   50\n" + verdict_lines(violations, ORACLES, judged=judged)
    message = failure_message(report, violations, unjudged(judged))
    assert message.count(str(violations[0])) == 1
    assert message.count("none recorded") == 1
    assert message.splitlines()[1].startswith("FAIL: WHERE; UNJUDGED, relied on: WHO")
    assert message.count(report) == 1


def test_ktap_reads_a_relied_on_unjudged_oracle_from_the_message() -> None:
    message = failure_message("report", [Violation("IRQ", 0, "1", "2")],
                              ["WHO UNJUDGED: samples: none", "MODE UNJUDGED: x"])  # fmt: skip
    assert relied_on("WHO", message)
    assert relied_on("MODE", message)
    assert not relied_on("IRQ", message)  # failed, not unjudged
    assert not relied_on("WHERE", message)
