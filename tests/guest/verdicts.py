"""How a guest test holds a run to its oracles: its report attached, then no violation and
no relied-on oracle that compared nothing.

Each flavour's tests pass their table and verdict lines (the flavour's own report
helpers), the violations and what each oracle compared::

    violations, judged = check_dt(run), judge_dt(run)
    verdicts = format_dt_verdicts(violations, applicable_dt_oracles(run), judged)
    assert_verdicts(request, format_dt_table(run), verdicts, violations, judged)
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
