from __future__ import annotations

from collections.abc import Callable

import pytest

from harness import timeouts as timeouts_module
from harness.builder.kernels import VARIANT_FRAGMENTS
from harness.errors import ConfigError, HarnessTimeout
from harness.timeouts import VARIANT_SCALE, Timeouts, wait_until


class FakeTime:
    """Stands in for `time` inside harness.timeouts: only sleeping moves its clock.

    The waits are then judged by what they did (probes, sleeps, the time they
    said they waited), never by a wall clock that a loaded host stretches.
    """

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(timeouts_module, "time", fake)
    return fake


def sequence(*results: int | OSError | None) -> tuple[Callable[[], int | None], list[int]]:
    """A probe that returns (or raises) ``results`` in turn, and a call counter."""
    calls: list[int] = []

    def probe() -> int | None:
        calls.append(1)
        result = results[len(calls) - 1]
        if isinstance(result, OSError):
            raise result
        return result

    return probe, calls


def test_returns_the_first_non_none_result(clock: FakeTime) -> None:
    probe, calls = sequence(None, None, 7, 8)
    assert (wait_until(probe, timeout_s=5, what="x", interval_s=0.5), len(calls)) == (7, 3)
    assert clock.sleeps == [0.5, 0.5]  # one pause between attempts, none after the result


def test_zero_is_a_result_not_a_retry() -> None:
    probe, _ = sequence(0)
    assert wait_until(probe, timeout_s=5, what="x") == 0


def test_times_out_with_what_and_waited(clock: FakeTime) -> None:
    probe, calls = sequence(None, None, None, None, None, 1)
    with pytest.raises(HarnessTimeout, match="waiting for SSH") as caught:
        wait_until(probe, timeout_s=1.0, what="SSH", interval_s=0.25)
    assert (caught.value.waited_s, clock.sleeps, len(calls)) == (1.0, [0.25] * 4, 5)


def test_the_last_pause_ends_at_the_deadline(clock: FakeTime) -> None:
    with pytest.raises(HarnessTimeout) as caught:
        wait_until(lambda: None, timeout_s=1.0, what="x", interval_s=0.375)
    assert (caught.value.waited_s, clock.sleeps) == (1.0, [0.375, 0.375, 0.25])


def test_abort_exception_is_raised_before_probing(clock: FakeTime) -> None:
    died = RuntimeError("QEMU exited with status 1")
    probe, calls = sequence(1)
    with pytest.raises(RuntimeError) as caught:
        wait_until(probe, timeout_s=10, what="SSH", abort=lambda: died)
    assert (caught.value, calls, clock.sleeps) == (died, [], [])


def test_abort_ends_a_wait_in_progress(clock: FakeTime) -> None:
    ticks: list[int] = []

    def abort() -> BaseException | None:
        ticks.append(1)
        return ValueError("gone") if len(ticks) == 3 else None

    with pytest.raises(ValueError, match="gone"):
        wait_until(lambda: None, timeout_s=10, what="x", interval_s=0.5, abort=abort)
    assert clock.sleeps == [0.5, 0.5]  # ended on the third check, long before 10 s


def test_oserror_is_retried(clock: FakeTime) -> None:
    probe, calls = sequence(ConnectionRefusedError(111, "refused"), OSError("reset"), 42)
    assert (wait_until(probe, timeout_s=5, what="x", interval_s=0.5), len(calls)) == (42, 3)


def test_last_oserror_is_reported_on_timeout(clock: FakeTime) -> None:
    refused = ConnectionRefusedError(111, "Connection refused")

    def probe() -> int | None:
        raise refused

    with pytest.raises(HarnessTimeout) as caught:
        wait_until(probe, timeout_s=1.0, what="SSH", interval_s=0.5)
    assert caught.value.last_error is refused
    assert "Connection refused" in str(caught.value)


def test_other_exceptions_from_the_probe_propagate() -> None:
    def probe() -> int | None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        wait_until(probe, timeout_s=5, what="x")


def test_scaled_by_multiplies_every_budget() -> None:
    scaled = Timeouts().scaled_by(3)
    assert scaled == Timeouts(
        scale=3, boot_s=360, qmp_s=30, command_s=360, shutdown_s=45, silence_s=180
    )


def test_scaling_twice_compounds() -> None:
    assert Timeouts().scaled_by(2).scaled_by(0.5) == Timeouts()


@pytest.mark.parametrize("scale", [0, -1])
def test_scaled_by_rejects_non_positive(scale: float) -> None:
    with pytest.raises(ConfigError, match="must be > 0"):
        Timeouts().scaled_by(scale)


def test_from_env_rejects_a_non_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFBENCH_TIMEOUT_SCALE", "abc")
    with pytest.raises(ConfigError, match="PROFBENCH_TIMEOUT_SCALE='abc' is not a number"):
        Timeouts.from_env()


def test_from_env_scale_two_doubles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFBENCH_TIMEOUT_SCALE", "2")
    timeouts = Timeouts.from_env()
    assert (timeouts.scale, timeouts.boot_s, timeouts.qmp_s) == (2, 240, 20)


def test_from_env_default_is_unscaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFBENCH_TIMEOUT_SCALE", raising=False)
    assert Timeouts.from_env() == Timeouts()


def test_every_kernel_variant_has_a_budget_factor_and_the_sanitizers_get_more() -> None:
    assert set(VARIANT_SCALE) == set(VARIANT_FRAGMENTS)
    assert VARIANT_SCALE["default"] == 1.0
    assert VARIANT_SCALE["debug"] > 1.0
    assert VARIANT_SCALE["kcsan"] > 1.0


def test_for_variant_multiplies_by_the_variant_s_factor_and_leaves_others_alone() -> None:
    assert Timeouts().for_variant("kcsan") == Timeouts().scaled_by(VARIANT_SCALE["kcsan"])
    assert Timeouts().scaled_by(2).for_variant("debug").command_s == 120.0 * 2 * 2
    assert Timeouts().for_variant("a-variant-without-a-factor") == Timeouts()


def test_an_overcommitted_guest_gets_budgets_in_proportion() -> None:
    # Up to VCPUS_PER_CORE vCPUs a host core: the budgets as measured.
    assert Timeouts().for_overcommit(4, host_cores=2) == Timeouts()
    assert Timeouts().for_overcommit(1, host_cores=2) == Timeouts()
    # 8 vCPUs on 2 cores run a quarter of the time each: twice the budgets.
    assert Timeouts().for_overcommit(8, host_cores=2).command_s == 120.0 * 2
    assert Timeouts().for_overcommit(8, host_cores=4) == Timeouts()
    assert Timeouts().scaled_by(3).for_overcommit(16, host_cores=2).boot_s == 120.0 * 3 * 4
