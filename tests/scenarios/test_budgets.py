"""C-3 and TP-O10 where they are exact: input-free runs, whose guest clock counts instructions.

Every flavour's budget scenario (`Flavour.budget_scenario`, in its folder: a burst of 10
on one vCPU; tprof's adds a kick and STOP) runs ``--deterministic`` with the unmutated
module, where every budget holds, and with each mutant that breaks one, where exactly
that one fails: the core's ``slow_producer`` breaks C-3 in every flavour, tprof's
``stop_waits`` its TP-O10 (`harness.agent.oracles.budgets` and
`harness.agent.flavours.tprof.budgets` say what the budgets are and why). ``invoke
mutants`` runs the same cases as its ``deterministic`` group.
"""

from __future__ import annotations

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.mutants import NONE
from harness.builder.cache import Cache
from harness.cli.session import ResolvedRequest
from harness.scenarios.deterministic_bundle import run_deterministic
from harness.scenarios.load import load_scenario, on_kernel

pytestmark = pytest.mark.guest


#: (flavour, mutant, the budget it breaks): every flavour unmutated and slow, tprof's STOP.
CASES = [
    *((name, mutant, broken) for name in flavours.names()
      for mutant, broken in ((NONE, None), ("slow_producer", "C-3"))),
    ("tprof", "stop_waits", "TP-O10"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("flavour", "mutant", "broken"), CASES, ids=[f"{f}-{m}" for f, m, _ in CASES]
)
def test_a_time_budget_fails_only_under_its_mutant(
    cache: Cache, flavour: str, mutant: str, broken: str | None, run_request: ResolvedRequest
) -> None:
    path = behaviour(flavour).budget_scenario
    assert path is not None
    scenario = on_kernel(load_scenario(path), run_request.kernel.version)
    result = run_deterministic(scenario, cache, kind="deterministic", attempts=1, mutant=mutant)
    verdicts = result.repro.verdicts[0]
    failed = [f"{v.expectation}: observed {v.observed}" for v in verdicts if not v.held]
    expected = [v for v in failed if v.startswith(f"oracle {broken} ")] if broken else []
    assert failed == expected, f"bundle {result.repro.bundle}:\n" + "\n".join(failed)
    if broken:
        assert expected, f"{mutant} did not break {broken}; bundle {result.repro.bundle}"
