"""The matrix worker budget: one worker per host core, never more."""

from __future__ import annotations

import pytest

from harness.cli.testrun import worker_budget
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
