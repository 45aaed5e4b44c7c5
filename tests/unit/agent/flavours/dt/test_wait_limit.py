"""How long a dt run's `wait` may take after its background reader (dt.run.wait_limit_s)."""

from __future__ import annotations

from harness.agent.flavours.dt.run import wait_limit_s
from harness.timeouts import Timeouts


def test_the_default_budget_keeps_the_reader_limit_and_a_minute() -> None:
    assert wait_limit_s(4, Timeouts().command_s) == 64


def test_a_scaled_budget_lets_the_loops_finish_on_a_shared_host() -> None:
    """The noisy neighbour's guest (budget x 3): cold CI of 189533d cut its dt run at 64 s."""
    slow = Timeouts().scaled_by(3)
    assert wait_limit_s(4, slow.command_s) == int(slow.command_s / 2) > 64
