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
from tests.conftest import AGENT_REPORT


def problems(
    request: pytest.FixtureRequest,
    report: tuple[str, str],
    violations: Sequence[Violation],
    judged: Sequence[Judged],
    relied: tuple[str, ...] | None = None,
) -> list[str]:
    """Each violation and each UNJUDGED oracle of ``relied`` (None: every one), as text.

    ``report`` is the run's (table, verdict lines); it goes into the test's summary
    (a quirk run's defect shows there as XFAIL) and after each problem.
    """
    text = "\n".join(report)
    request.node.user_properties.append((AGENT_REPORT, text))
    return [f"{p}\n\n{text}" for p in (*map(str, violations), *unjudged(judged, relied))]


def assert_verdicts(
    request: pytest.FixtureRequest,
    report: tuple[str, str],
    violations: Sequence[Violation],
    judged: Sequence[Judged],
    relied: tuple[str, ...] | None = None,
) -> None:
    """Fail on every violation and on every oracle of ``relied`` that compared nothing."""
    found = problems(request, report, violations, judged, relied)
    assert not found, "\n" + "\n\n".join(found)
