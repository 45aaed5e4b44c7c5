"""Per-test time limits (pytest-timeout): one per tier, scaled like every harness budget.

Registered as a plugin by ``tests/conftest.py``. At collection every test gets a
``timeout`` marker: its tier's limit (`TIER_LIMITS_S`, by the directory under
``tests/``), or its own ``limit_s(seconds)`` marker, multiplied by the scale of
`Timeouts.from_env` (``PROFBENCH_TIMEOUT_SCALE``), by the kernel variant's
factor (`harness.timeouts.VARIANT_SCALE`) and by the largest guest's overcommit of
the host's cores (`Timeouts.for_overcommit`), as its guest's budgets are. A test that
needs more says so::

    @pytest.mark.limit_s(1800)  # two boots of the debug kernel
    def test_debug_kernel(...): ...

The limit covers setup, call and teardown, so a hung boot or a hung unload fails
its test too. Image builds are the exception: a session fixture that may build
runs them under `suspended`, since a build has its own budget
(`harness.process.run_logged`) and is not the test's doing.

``--timeout N`` on the command line overrides all of this (``--timeout 0``: off,
for a debugging session); so does a test's own ``pytest.mark.timeout``.

Why the signal method: SIGALRM raises `pytest.fail` inside the test's main
thread, so the test fails like any other and its fixtures' finalisers still run:
`Guest.__exit__` stops QEMU by its PID and writes the verdict, the pool goes on
with the next test. The thread method instead dumps the stacks and
``os._exit(1)``s the whole process: a worker's guests would lose their records
and every test after it would be lost. pytest-xdist (>= 3.5, the pinned floor)
runs tests in each worker's main thread, where SIGALRM can be delivered, so the
signal method holds under ``-n`` too. (pytest-timeout falls back to the thread
method on its own if a test ever runs off the main thread.) Nothing in the
harness or the tests uses SIGALRM itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

import pytest
from pytest_timeout import Settings

from harness.timeouts import Timeouts
from tests import runrequest

TESTS_ROOT = Path(__file__).resolve().parent

#: Unscaled seconds per tier. Unit tests are pure and take well under a second each
#: (the slowest compiles profctl): 30 s only catches a hang. A guest test may boot
#: its topology's pooled guest under TCG on 2 busy cores (boot_s is 120 s), deploy
#: the agent and run it for tens of seconds; tests that boot their own guests boot
#: two. Scenarios and matrix cells boot a guest of their own and build an agent for
#: it (spec, quirks, kernel variant) inside the test.
TIER_LIMITS_S: Mapping[str, float] = MappingProxyType(
    {"unit": 30.0, "guest": 900.0, "scenarios": 1200.0, "matrix": 1200.0}
)
#: Anything not under one of those directories: treat it like a guest test.
DEFAULT_TIER = "guest"
CURRENT = pytest.StashKey[pytest.Item]()


def tier_of(path: Path) -> str:
    """The tier a test file belongs to: its first directory under ``tests/``."""
    try:
        parts = path.resolve().relative_to(TESTS_ROOT).parts
    except ValueError:
        return DEFAULT_TIER
    return parts[0] if len(parts) > 1 and parts[0] in TIER_LIMITS_S else DEFAULT_TIER


def limit_s(tier: str, own_s: float | None, scale: float) -> float:
    """A test's limit: its own seconds (else its tier's) times ``scale``.

    :raise ValueError: ``own_s`` is not a positive number of seconds.
    """
    if own_s is not None and not own_s > 0:
        raise ValueError(f"limit_s takes a positive number of seconds, not {own_s!r}")
    return (own_s if own_s is not None else TIER_LIMITS_S[tier]) * scale


def _own_limit_s(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("limit_s")
    if marker is None:
        return None
    if len(marker.args) != 1 or marker.kwargs:
        raise pytest.UsageError(f"{item.nodeid}: use limit_s(seconds), got {marker}")
    return float(marker.args[0])


def _scale(config: pytest.Config) -> float:
    """The limits' scale: the environment's, this run's kernel variant's factor and its
    largest guest's overcommit (its request's; 1 vCPU where there is none: a pytest run
    without tests/conftest.py, which settles it).
    """
    request = config.stash.get(runrequest.KEY, None)
    timeouts = Timeouts.from_env()
    if request is None:
        return timeouts.for_overcommit(1).scale
    vcpus = max(topology.cpus for topology in request.topologies)
    return timeouts.for_variant(request.variant).for_overcommit(vcpus).scale


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test without a limit of its own its scaled tier limit."""
    if config.getoption("timeout") is not None:  # --timeout N (pytest-timeout's): the user's
        return
    scale = _scale(config)
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        seconds = limit_s(tier_of(item.path), _own_limit_s(item), scale)
        item.add_marker(pytest.mark.timeout(seconds, method="signal"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Remember the running test, so `suspended` can reach its timer."""
    item.config.stash[CURRENT] = item
    try:
        return (yield)
    finally:
        del item.config.stash[CURRENT]


def _timer_settings(item: pytest.Item) -> Settings | None:
    """pytest-timeout's settings from the test's ``timeout`` marker, if it arms one now."""
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return None
    seconds = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if not seconds or marker.kwargs.get("func_only"):  # off, or armed around the call only
        return None
    return Settings(seconds, marker.kwargs.get("method", "signal"), False, False)


@contextlib.contextmanager
def suspended(config: pytest.Config) -> Iterator[None]:
    """Run the block with the current test's limit off, then restart it in full.

    Only for blocks with a budget of their own: image and agent builds (each
    ``make`` runs under `harness.process.run_logged`'s timeout, the cache lock
    under ``lock_timeout_s``). Outside a test, or without a limit, it does nothing.
    """
    item = config.stash.get(CURRENT, None)
    settings = _timer_settings(item) if item is not None else None
    if item is None or settings is None:
        yield
        return
    config.hook.pytest_timeout_cancel_timer(item=item)
    try:
        yield
    finally:
        config.hook.pytest_timeout_set_timer(item=item, settings=settings)
