"""C-3 and TP-O10 where they are exact: input-free runs, whose guest clock counts instructions.

tprof's budget scenario (``harness/agent/flavours/tprof/tprof-budgets.toml``: a burst of
10 on one vCPU, a kick, STOP) runs ``--deterministic`` with the unmutated module, where
both budgets hold, and with each mutant that breaks one of them, where exactly that one
fails (`harness.agent.flavours.tprof.budgets` says what the budgets are and why).
``invoke mutants`` runs the same cases as its ``deterministic`` group.
"""

from __future__ import annotations

import pytest

from harness.agent.flavour import behaviour
from harness.agent.mutants import NONE
from harness.build.cache import Cache
from harness.scenarios.deterministic_bundle import run_deterministic
from harness.scenarios.load import load_scenario

pytestmark = pytest.mark.guest


@pytest.mark.parametrize(
    ("mutant", "broken"),
    [(NONE, None), ("slow_producer", "C-3"), ("stop_waits", "TP-O10")],
    ids=["unmutated", "slow_producer", "stop_waits"],
)
def test_a_time_budget_fails_only_under_its_mutant(
    cache: Cache, mutant: str, broken: str | None
) -> None:
    path = behaviour("tprof").budget_scenario
    assert path is not None
    result = run_deterministic(load_scenario(path), cache, mode="deterministic", attempts=1,
                               mutant=mutant)  # fmt: skip
    verdicts = result.repro.verdicts[0]
    failed = [f"{v.expectation}: observed {v.observed}" for v in verdicts if not v.held]
    expected = [v for v in failed if v.startswith(f"oracle {broken} ")] if broken else []
    assert failed == expected, f"bundle {result.repro.bundle}:\n" + "\n".join(failed)
    if broken:
        assert expected, f"{mutant} did not break {broken}; bundle {result.repro.bundle}"
