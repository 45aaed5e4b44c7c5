"""How a guest test holds a run to its oracles: its report attached, then no violation and
no relied-on oracle that compared nothing.

Each flavour's tests pass the run's report (its table and its verdict lines, from the
flavour's own report helpers), the violations and what each oracle compared::

    flavour = behaviour("dt")
    violations, judged = flavour.check(run), flavour.judged(run)
    report = (table, verdicts)                  # the flavour's table and verdict lines
    assert_verdicts(request, report, violations, judged, relied=("WHERE", "WHO"))
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.agent.oracles.report import unjudged
from harness.agent.oracles.results import Judged, Violation
from harness.ktap import RELIED
from tests.conftest import AGENT_REPORT


def failure_message(report: str, violations: Sequence[Violation], missing: Sequence[str]) -> str:
    """What a failed run's assertion says: the oracles that failed or judged nothing, by
    name, then the run's report once, where each violation and each UNJUDGED reason
    stands under its oracle's verdict line (issue 44: a failing WHERE was printed twice).
    ``missing``: `harness.agent.oracles.report.unjudged`'s lines."""
    failed = sorted({v.oracle for v in violations})
    empty = sorted({line.split(" ", 1)[0] for line in missing})
    head = "; ".join(part for part in (f"FAIL: {', '.join(failed)}" if failed else "",
                                       f"{RELIED}{', '.join(empty)}" if empty else "")
                     if part)  # fmt: skip
    return f"\n{head} (each once below, under its verdict line)\n\n{report}"


def problems(
    request: pytest.FixtureRequest,
    report: tuple[str, str],
    violations: Sequence[Violation],
    judged: Sequence[Judged],
    relied: tuple[str, ...] | None = None,
) -> list[str]:
    """Each violation and each UNJUDGED oracle of ``relied`` (None: every one), one line each.

    ``report`` is the run's (table, verdict lines); it goes into the test's summary
    (a quirk run's defect shows there as XFAIL), printed once at the end of the run.
    A quirk run's test reads which oracles failed from these lines' first words.
    """
    request.node.user_properties.append((AGENT_REPORT, "\n".join(report)))
    return [*map(str, violations), *unjudged(judged, relied)]


def assert_verdicts(
    request: pytest.FixtureRequest,
    report: tuple[str, str],
    violations: Sequence[Violation],
    judged: Sequence[Judged],
    relied: tuple[str, ...] | None = None,
) -> None:
    """Fail on every violation and on every oracle of ``relied`` that compared nothing.

    The message is `failure_message`: the oracles by name, then the report once.
    """
    if problems(request, report, violations, judged, relied):
        missing = unjudged(judged, relied)
        raise AssertionError(failure_message("\n".join(report), violations, missing))
