"""What CI's prebuild makes beside the first tier, and in which order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.agent.mutants import NONE
from harness.builder.cache import Cache
from harness.builder.kernel import KernelChoice
from harness.cli import prebuild
from harness.cli.ci import CI_IMAGES, CI_MUTANTS
from harness.mutation.plan import MutationRequest, planned
from tests.scenarios.test_budgets import CASES


def test_prebuild_makes_the_later_images_in_ci_order_then_the_mutant_agents(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[tuple[str, ...]] = []

    def images(arch: object, variant: str, cache: Cache, *, kernel: KernelChoice) -> None:
        made.append(("images", variant, kernel.version))

    def agents(request: MutationRequest, cache: Cache) -> int:
        made.append(("agents", str(request.per_oracle)))
        return 1

    monkeypatch.setattr(prebuild, "prepare_images", images)
    monkeypatch.setattr(prebuild, "build_default_group", agents)
    prebuild.build_later(Cache(tmp_path))
    later = [("images", variant, kernel) for _, variant, kernel in CI_IMAGES[1:]]
    assert made == [*later, ("agents", str(CI_MUTANTS.per_oracle))]
    assert CI_MUTANTS.per_oracle  # the set CI's mutant stage runs


def test_ci_leaves_the_budget_cases_to_the_scenario_tier_which_runs_each_of_them() -> None:
    """CI_MUTANTS runs no deterministic group: test_budgets has every case it would run."""
    assert not CI_MUTANTS.deterministic
    would_run = {
        (name, mutant)
        for name in flavours.names()
        if behaviour(name).budget_scenario is not None
        and (found := planned(name, full=False, case="deterministic"))
        for mutant in (NONE, *(m.name for m in found))
    }
    assert would_run
    assert would_run <= {(flavour, mutant) for flavour, mutant, _ in CASES}
