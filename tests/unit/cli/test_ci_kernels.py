"""What ``invoke ci`` builds and runs on each kernel version."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import arches
from harness.build.cache import Cache
from harness.build.kernel import KernelChoice
from harness.build.kernels import VARIANTS, VERSIONS
from harness.cli import checks, testrun
from harness.cli.testrun import (
    CI_DEBUG_KERNEL_TESTS,
    CI_IMAGES,
    CI_NEWER_KERNEL,
    CI_SANITIZER_RUNS,
    guest_options,
)
from harness.matrix.load import get_matrix


def test_ci_builds_known_images_and_the_612_default_kernel() -> None:
    assert all(a in arches.ARCHES and v in VARIANTS and k in VERSIONS for a, v, k in CI_IMAGES)
    assert ("arm64", "default", "6.12") in CI_IMAGES
    assert len(set(CI_IMAGES)) == len(CI_IMAGES)


def test_the_newer_kernel_tier_boots_612_and_every_kernel_it_boots_is_built() -> None:
    options = guest_options(CI_NEWER_KERNEL)
    assert options[options.index("--kernel") + 1] == "6.12"
    booted = {(CI_NEWER_KERNEL.arch, CI_NEWER_KERNEL.variant, CI_NEWER_KERNEL.kernel)}
    booted |= {(c.arch, c.variant, c.kernel) for c in get_matrix("quick").cells}
    booted |= {(r.arch, r.variant, r.kernel) for r in CI_SANITIZER_RUNS}
    assert booted <= set(CI_IMAGES)


def test_ci_runs_kasan_on_2_vcpus_and_kcsan_on_8() -> None:
    assert {(r.variant, r.cpus) for r in CI_SANITIZER_RUNS} == {("debug", 2), ("kcsan", 8)}


def test_ci_runs_the_debug_kernel_test_with_the_debug_kernel_and_builds_beside_every_stage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first tier starts before the debug kernel is built, so the test that boots it
    (it skips without it) runs in the debug run; the later kernels build beside the
    stages, in the order the stages ask for them, each ready before its pytest starts."""
    runs: list[list[str]] = []
    events: list[str] = []

    @contextlib.contextmanager
    def fake_beside(argv: list[str], **_: object) -> Iterator[Callable[[], int]]:
        events.append("beside: " + " ".join(argv[1:]))

        def finish() -> int:
            events.append("finish")
            return 0

        yield finish

    def fake_run(argv: list[str]) -> int:
        runs.append(list(argv))
        events.append("pytest")
        return 0

    def fake_images(arch: object, variant: str, cache: object, *, kernel: KernelChoice) -> None:
        events.append(f"images {variant} {kernel.version}")

    monkeypatch.setattr(testrun, "ensure_host", lambda: None)
    monkeypatch.setattr(testrun, "prepare_images", fake_images)
    monkeypatch.setattr(testrun, "beside", fake_beside)
    monkeypatch.setattr(testrun, "_run", fake_run)
    monkeypatch.setattr(checks, "run_checks", lambda _: True)
    monkeypatch.setattr(testrun, "new_run_dir", lambda *parts: tmp_path)
    monkeypatch.setattr(testrun, "run_matrix", lambda *a, **k: _noted(events, "matrix"))
    monkeypatch.setattr(testrun, "run_quick_mutants", lambda _: _noted(events, "mutants"))
    assert testrun.run_ci(Cache(tmp_path), workers=2) == 0

    first, debug, newer, kcsan = runs
    assert f"--ignore={CI_DEBUG_KERNEL_TESTS}" in first
    assert CI_DEBUG_KERNEL_TESTS in debug
    assert "not selftest" not in debug  # the test is a selftest
    assert debug[debug.index("--variant") + 1] == "debug"
    assert debug[debug.index("-n") + 1] == "2"
    assert newer[newer.index("--kernel") + 1] == "6.12"
    assert newer[newer.index("-n") + 1] == "2"
    assert kcsan[kcsan.index("--variant") + 1] == "kcsan"
    assert "-n" not in kcsan  # 8 vCPUs fill both host cores
    later = [f"images {v} {k}" for _, v, k in CI_IMAGES[1:]]
    assert events == [
        "images default 6.1", "beside: -m harness.cli.prebuild", "pytest",
        later[0], "pytest", later[1], "pytest", later[2], "pytest",
        "matrix", "finish", "mutants",
    ]  # fmt: skip


def _noted(events: list[str], event: str) -> int:
    events.append(event)
    return 0
