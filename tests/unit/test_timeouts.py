from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.errors import ConfigError, HarnessTimeout
from harness.timeouts import Timeouts, wait_until


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


def test_returns_the_first_non_none_result() -> None:
    probe, calls = sequence(None, None, 7, 8)
    assert (wait_until(probe, timeout_s=5, what="x", interval_s=0.001), len(calls)) == (7, 3)


def test_zero_is_a_result_not_a_retry() -> None:
    probe, _ = sequence(0)
    assert wait_until(probe, timeout_s=5, what="x") == 0


def test_times_out_with_what_and_waited() -> None:
    started = time.monotonic()
    with pytest.raises(HarnessTimeout, match="waiting for SSH") as caught:
        wait_until(lambda: None, timeout_s=0.05, what="SSH", interval_s=0.01)
    elapsed = time.monotonic() - started
    assert 0.05 <= caught.value.waited_s <= elapsed < 2


def test_abort_exception_is_raised_before_probing() -> None:
    died = RuntimeError("QEMU exited with status 1")
    probe, calls = sequence(1)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as caught:
        wait_until(probe, timeout_s=10, what="SSH", abort=lambda: died)
    assert (caught.value, calls, time.monotonic() - started < 1) == (died, [], True)


def test_abort_ends_a_wait_in_progress() -> None:
    ticks: list[int] = []

    def abort() -> BaseException | None:
        ticks.append(1)
        return ValueError("gone") if len(ticks) == 3 else None

    with pytest.raises(ValueError, match="gone"):
        wait_until(lambda: None, timeout_s=10, what="x", interval_s=0.001, abort=abort)


def test_oserror_is_retried() -> None:
    probe, calls = sequence(ConnectionRefusedError(111, "refused"), OSError("reset"), 42)
    assert (wait_until(probe, timeout_s=5, what="x", interval_s=0.001), len(calls)) == (42, 3)


def test_last_oserror_is_reported_on_timeout() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")

    def probe() -> int | None:
        raise refused

    with pytest.raises(HarnessTimeout) as caught:
        wait_until(probe, timeout_s=0.05, what="SSH", interval_s=0.01)
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
