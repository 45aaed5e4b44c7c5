"""The shared stress plan, every flavour (in the tree, or found with ``--flavour-path``).

Each case of `harness.scenarios.stress` is a scenario written for this test's topology,
kept in the session's artifacts (``stress/<flavour>/``; ``invoke repro FILE`` replays
one), run in the session's guest and judged twice: by its expectations (each drop
cause's counter against the harness's count, per CPU) and by every oracle of the
flavour, each count oracle that applies having compared something. A case the
flavour did not declare is skipped as UNJUDGED, with why: never passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.oracles.report import unjudged, vcpus_share_cores
from harness.scenarios.stress import CAUSE_PREFIX, case_names, run_case, stress_plan
from harness.vm.topology import CpuTopology
from tests.conftest import AGENT_REPORT, agent_after_skips
from tests.guest.verdicts import count_oracles, failure_message

pytestmark = pytest.mark.guest
#: A case every flavour has a name for, declared or not: missing ones show as UNJUDGED.
SHARED_CASES = ("fill", "reader", "restart", "exact")
#: The cases of busy loops, which no count is known for before the run: they rely on the
#: shared count oracles having compared something; every oracle's violation fails them.
BUSY_CASES, BUSY_RELIED = ("reader", "restart"), ("IRQ", "CALLS")
#: The cases a tier of more vCPUs than this leaves out: the busy ones (busy loops on every
#: CPU, 43 s of the 85 s the plan took on 8 vCPUs), the exact run, which the flavours'
#: own tests (standard runs with their readers, exact runs) already make there, and each
#: drop cause alone: its steps provoke it on CPU 0 (`harness.agent.values.stress`), and
#: 2 vCPUs already hold a second CPU whose counts must stay apart from it (the six causes
#: took 10.7 s of test time on 8 vCPUs, a sixth of the witness's and stress plan's cost
#: that put `invoke test --cpus 8` at 1.256 times 91c9c73's). Filling every CPU's ring
#: runs on every topology: per-CPU capacity is what more CPUs can get wrong.
FEW_VCPU_CASES, FEW_VCPUS = (*BUSY_CASES, "exact"), 2


def few_vcpus_only(case: str) -> bool:
    """Whether ``case`` runs only where the guest has `FEW_VCPUS` or fewer."""
    return case in FEW_VCPU_CASES or case.startswith(CAUSE_PREFIX)


def _cases() -> list[object]:
    params: list[object] = []
    for name in flavours.names():
        stress = behaviour(name).stress
        unprovoked = (f"{CAUSE_PREFIX}{c}" for c in (stress.unprovoked if stress else ()))
        names = dict.fromkeys((*case_names(stress), *unprovoked, *SHARED_CASES))
        params += [pytest.param(name, case, marks=pytest.mark.flavour(name), id=f"{name}-{case}")
                   for case in names]  # fmt: skip
    return params


@pytest.mark.parametrize(("name", "case"), _cases())
def test_every_flavour_survives_the_stress_plan(
    topology: CpuTopology,
    run_root: Path,
    request: pytest.FixtureRequest,
    name: str,
    case: str,
) -> None:
    flavour = behaviour(name)
    plan = stress_plan(name, flavour.stress, topology.name, topology.cpus)
    missing = dict(plan.missing)
    if case in missing or "every case" in missing:
        why = missing.get(case, missing.get("every case"))
        pytest.skip(
            f"UNJUDGED {name} {case}: {why}; once its Stress declares it: "
            "`invoke test --cpus 2 -k test_every_flavour_survives_the_stress_plan`"
        )
    if few_vcpus_only(case) and topology.cpus > FEW_VCPUS:
        pytest.skip(
            f"{case} runs on {FEW_VCPUS} vCPUs or fewer (a cause is provoked on CPU 0; "
            "the flavours' own standard and exact runs judge the busy oracles on more): "
            "`invoke test --cpus 2 -k test_every_flavour_survives_the_stress_plan`"
        )
    agent = agent_after_skips(request)
    (chosen,) = [c for c in plan.cases if c.name == case]
    result = run_case(agent, chosen, run_root / "stress" / name / topology.name)
    report = flavour.report(result.run, result.violations)
    request.node.user_properties.append((AGENT_REPORT, report))
    failed = result.failures()
    # A busy case relies on less: dt's DT-O7, say, needs one event, and a restart makes two.
    relied = BUSY_RELIED if case in BUSY_CASES else count_oracles(flavour, result.run)
    missing_counts = unjudged(
        flavour.judged(result.run), relied, cores_shared=vcpus_share_cores(topology.cpus)
    )
    message = f"{result.scenario}:\n" + "\n".join(failed)
    assert not failed, message + failure_message(report, result.violations, missing_counts)
    assert not missing_counts, message + failure_message(report, [], missing_counts)
