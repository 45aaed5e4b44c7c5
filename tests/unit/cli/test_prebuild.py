"""What CI's prebuild makes beside the first tier, and in which order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.build.cache import Cache
from harness.build.kernel import KernelChoice
from harness.cli import prebuild
from harness.cli.mutantruns import MutationRequest
from harness.cli.testrun import CI_IMAGES, CI_MUTANTS


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
