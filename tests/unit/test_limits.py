"""The per-test limits: tier defaults, own markers, the scale, and builds left out."""

from __future__ import annotations

import pytest

from tests.limits import TESTS_ROOT, TIER_LIMITS_S, limit_s, tier_of

pytest_plugins = ("pytester",)


@pytest.mark.parametrize(
    ("path", "tier"),
    [
        ("unit/vm/test_pool.py", "unit"),
        ("unit/test_limits.py", "unit"),
        ("guest/test_boot.py", "guest"),
        ("scenarios/test_shipped.py", "scenarios"),
        ("matrix/test_matrix.py", "matrix"),
        ("test_stray.py", "guest"),  # directly under tests/: the generous default
        ("data/logs/test_x.py", "guest"),
    ],
)
def test_the_tier_is_the_first_directory_under_tests(path: str, tier: str) -> None:
    assert tier_of(TESTS_ROOT / path) == tier


def test_a_file_outside_tests_gets_the_default_tier() -> None:
    assert tier_of(TESTS_ROOT.parent / "harness" / "timeouts.py") == "guest"


def test_unit_tests_get_the_smallest_limit() -> None:
    assert TIER_LIMITS_S["unit"] == min(TIER_LIMITS_S.values())
    assert TIER_LIMITS_S["unit"] < TIER_LIMITS_S["guest"] <= TIER_LIMITS_S["matrix"]


@pytest.mark.parametrize(
    ("tier", "own_s", "scale", "expected"),
    [
        ("unit", None, 1.0, 30.0),
        ("guest", None, 1.0, 900.0),
        ("guest", None, 2.5, 2250.0),
        ("matrix", None, 0.5, 600.0),
        ("unit", 120.0, 1.0, 120.0),  # a test's own limit replaces its tier's ...
        ("guest", 1800.0, 3.0, 5400.0),  # ... and is scaled the same way
    ],
)
def test_limit_is_own_or_tier_seconds_times_the_scale(
    tier: str, own_s: float | None, scale: float, expected: float
) -> None:
    assert limit_s(tier, own_s, scale) == expected


@pytest.mark.parametrize("own_s", [0.0, -5.0])
def test_own_limit_must_be_positive(own_s: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        limit_s("guest", own_s, 1.0)


PLUGGED = """
from tests import limits

def pytest_configure(config):
    config.pluginmanager.register(limits, "profbench-limits")
"""

SLOW_TESTS = """
import time
import pytest
from tests import limits

@pytest.mark.limit_s(200)
def test_over_its_own_limit():
    time.sleep(30)

def test_over_the_tier_limit():
    time.sleep(30)

@pytest.mark.limit_s(2000)
def test_a_build_is_not_counted(pytestconfig):
    with limits.suspended(pytestconfig):
        time.sleep(1.5)  # "a build": longer than the test's limit, not counted

@pytest.mark.timeout(0)
@pytest.mark.limit_s(200)
def test_own_timeout_marker_wins():
    time.sleep(0.3)
"""


def test_limits_fail_slow_tests_and_leave_builds_out(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real pytest run with the plugin: which tests the scaled limits stop, and when."""
    monkeypatch.setenv("PROFBENCH_TIMEOUT_SCALE", "0.0005")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_ROOT.parent))
    pytester.makeconftest(PLUGGED)
    pytester.makepyfile(test_slow=SLOW_TESTS)
    # A subprocess: SIGALRM timers of a run inside this one would clobber this test's own.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "markers=limit_s")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_over_its_own_limit _*",
            "*Failed: Timeout (>0.1s) from pytest-timeout.",
            "*_ test_over_the_tier_limit _*",
            "*Failed: Timeout (>0.45s) from pytest-timeout.",
        ]
    )
