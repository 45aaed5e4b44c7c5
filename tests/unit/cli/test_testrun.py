"""The matrix worker budget: one worker per host core, never more; the tier's default."""

from __future__ import annotations

import pytest

from harness.cli.testrun import tier_workers, worker_budget
from harness.errors import ConfigError


def test_auto_is_one_worker_per_core() -> None:
    assert worker_budget("auto", cpus=2) == 2
    assert worker_budget("auto", cpus=16) == 16


def test_a_number_is_capped_at_the_cores() -> None:
    assert worker_budget("1", cpus=2) == 1
    assert worker_budget("8", cpus=2) == 2


@pytest.mark.parametrize("text", ["0", "-1", "two", ""])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="auto' or a positive number"):
        worker_budget(text, cpus=2)


def test_the_tier_runs_a_guest_per_core_by_default() -> None:
    assert tier_workers(8, 1024, cores=2, available_mib=20_000) == 2
    assert tier_workers(1, 1024, cores=16, available_mib=100_000) == 16


def test_a_guest_over_eight_vcpus_runs_alone() -> None:
    assert tier_workers(9, 1024, cores=2, available_mib=20_000) == 1
    assert tier_workers(40, 1024, cores=64, available_mib=1_000_000) == 1


def test_the_tier_runs_no_more_guests_than_memory_holds() -> None:
    assert tier_workers(8, 1024, cores=16, available_mib=5_000) == 2  # 2 GiB a guest
    assert tier_workers(8, 4096, cores=2, available_mib=1_000) == 1  # never none
