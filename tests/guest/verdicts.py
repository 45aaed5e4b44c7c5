"""How a guest test holds a run to its oracles: its report attached, then no violation and
no relied-on oracle that compared nothing.

A flavour's tests hold a run to every oracle that applies, each of ``relied`` having
compared something::

    assert_held(behaviour("dt"), run, request, relied=("WHERE", "WHO"))

hwpmc's tests, whose quirk runs mark the defect they reproduce, use `problems`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.agent.flavour import AgentRun, Flavour
from harness.agent.oracles.content_view import CONTENT_ORACLES
from harness.agent.oracles.report import unjudged, vcpus_share_cores
from harness.agent.values.results import Judged, Violation
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


def assert_held(
    flavour: Flavour,
    run: AgentRun,
    request: pytest.FixtureRequest,
    relied: tuple[str, ...] | None = None,
) -> None:
    """Fail on every violation of ``flavour``'s oracles and every oracle of ``relied``
    that compared nothing (None: each count oracle that applies, `count_oracles`; a
    test whose run has a workload names the content oracles it relies on).

    The flavour's report (its table, perf beside it, its verdicts, the content oracles')
    goes into the test's summary; the message is `failure_message`.
    """
    violations, judged = flavour.check(run), flavour.judged(run)
    report = flavour.report(run, violations)
    request.node.user_properties.append((AGENT_REPORT, report))
    missing = unjudged(judged, count_oracles(flavour, run) if relied is None else relied)
    if violations or missing:
        raise AssertionError(failure_message(report, violations, missing))


#: What a run judged by its counts alone relies on: not the content oracles (a run
#: whose purpose is a sanitizer's or a neighbour's may launch no workload), nor the
#: peer's (no peer beside it), nor C-3 (an instruction clock only).
NOT_COUNTS = frozenset({name for name, _ in CONTENT_ORACLES} | {"PEER", "PROFILE", "C-3"})


def count_oracles(flavour: Flavour, run: AgentRun) -> tuple[str, ...]:
    """The count oracles of ``flavour`` that apply to ``run``: the shared ones and its own."""
    applicable = flavour.applicable(run)
    return tuple(n for n in flavour.oracle_names if n in applicable and n not in NOT_COUNTS)


def uncounted(flavour: Flavour, run: AgentRun, vcpus: int) -> list[str]:
    """Each count oracle of ``run`` (`count_oracles`) that compared nothing, one line each.

    A test that judges a run by its violations alone passes a law that held over
    nothing (issue 45): the sanitizer and noisy-neighbour runs fail on these too.
    """
    relied = count_oracles(flavour, run)
    return unjudged(flavour.judged(run), relied, cores_shared=vcpus_share_cores(vcpus))
