"""What ``invoke ci`` builds and runs on each kernel version."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import arches
from harness.builder.cache import Cache
from harness.builder.kernel import KernelChoice
from harness.builder.kernels import VARIANTS, VERSIONS
from harness.cli import checks, ci
from harness.cli.ci import CI_IMAGES, CI_STAGES, CI_TIER_CPUS, DEBUG_KERNEL_TESTS, TRUTH_TESTS
from harness.cli.session import ResolvedRequest, request_from_json
from harness.matrix.load import get_matrix


def test_ci_builds_known_images_and_the_612_default_kernel() -> None:
    assert all(a in arches.ARCHES and v in VARIANTS and k in VERSIONS for a, v, k in CI_IMAGES)
    assert ("arm64", "default", "6.12") in CI_IMAGES
    assert len(set(CI_IMAGES)) == len(CI_IMAGES)


def test_every_kernel_ci_boots_is_one_it_builds() -> None:
    booted: set[tuple[str, str, str]] = {(c.arch, c.variant, c.kernel)
                                         for c in get_matrix("quick").cells}  # fmt: skip
    booted |= {(s.request.arch, s.request.variant, s.request.kernel) for s in CI_STAGES}
    assert booted <= set(CI_IMAGES)
    assert ("arm64", "default", "6.12") in booted


def test_ci_runs_kasan_on_2_vcpus_and_kcsan_on_8_and_on_2_for_the_rare_writers() -> None:
    found = {(s.request.variant, s.request.cpus) for s in CI_STAGES if SANITIZER in s.paths}
    assert found == {("debug", 2), ("kcsan", 8), ("kcsan", 2)}


SANITIZER = "tests/guest/test_sanitizers.py"


def test_every_kernel_and_variant_runs_the_truth_tests() -> None:
    """Issue 48: the content, peer and outside tests ran on 6.1 only; each kernel CI
    ships now runs them (6.1's in the first tier, which runs all of tests/guest)."""
    truth = {"test_content", "test_profile", "test_outside"}
    for kernel in CI_IMAGES[1:]:
        stages = [s for s in CI_STAGES
                  if (s.request.arch, s.request.variant, s.request.kernel) == kernel]  # fmt: skip
        chosen = set()
        for stage in stages:
            if stage.paths == ("tests/guest",):  # chosen by keyword: each name must match
                assert stage.keyword is not None
                chosen |= {name for name in truth if name in stage.keyword}
            chosen |= {name for name in truth for path in stage.paths if name in path}
        assert chosen == truth, kernel
    assert all(path.startswith("tests/guest/") for path in TRUTH_TESTS)


def test_ci_runs_the_debug_kernel_test_with_the_debug_kernel_and_builds_beside_every_stage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first tier starts before the debug kernel is built, so the test that boots it
    (it skips without it) runs in the debug run; the later kernels build beside the
    stages, in the order the stages ask for them, each ready before its pytest starts."""
    runs: list[list[str]] = []
    requests: list[ResolvedRequest] = []
    events: list[str] = []

    @contextlib.contextmanager
    def fake_beside(argv: list[str], **_: object) -> Iterator[Callable[[], int]]:
        events.append("beside: " + " ".join(argv[1:]))

        def finish() -> int:
            events.append("finish")
            return 0

        yield finish

    def fake_run(argv: list[str], *, request: Path) -> int:
        runs.append(list(argv))
        requests.append(request_from_json(request.read_text()))
        events.append("pytest")
        return 0

    def fake_images(arch: object, variant: str, cache: object, *, kernel: KernelChoice) -> None:
        events.append(f"images {variant} {kernel.version}")

    monkeypatch.setattr(ci, "ensure_host", lambda: None)
    monkeypatch.setattr(ci, "prepare_images", fake_images)
    monkeypatch.setattr(ci, "beside", fake_beside)
    monkeypatch.setattr(ci, "_run", fake_run)
    monkeypatch.setattr(checks, "run_checks", lambda _: True)
    monkeypatch.setattr(ci, "new_run_dir", lambda *parts: tmp_path)
    monkeypatch.setattr(ci, "run_matrix", lambda *a, **k: _noted(events, "matrix"))
    monkeypatch.setattr(ci, "run_quick_mutants", lambda _: _noted(events, "mutants"))
    monkeypatch.setattr(ci, "run_fuzz_stage", lambda _: _noted(events, "fuzz"))
    assert ci.run_ci(Cache(tmp_path), workers=2) == 0

    first, debug, newer, kcsan, kcsan_truth, kcsan_rare = runs
    assert f"--ignore={DEBUG_KERNEL_TESTS}" in first
    assert "tests/unit" not in first  # the unit tier runs shuffled with the static checks
    assert DEBUG_KERNEL_TESTS in debug
    assert "not selftest" not in debug  # the test is a selftest
    tier, debug_asked, newer_asked, kcsan_asked, truth_asked, rare_asked = requests  # once each
    assert [t.cpus for t in tier.topologies] == list(CI_TIER_CPUS)
    assert (tier.variant, tier.kernel.version) == ("default", "6.1")
    assert (debug_asked.variant, debug_asked.asked.memory_mib) == ("debug", 512)
    assert debug[debug.index("-n") + 1] == "2"
    assert newer_asked.kernel.version == "6.12"
    assert newer[newer.index("-n") + 1] == "2"
    assert (kcsan_asked.variant, kcsan_asked.topologies[0].cpus) == ("kcsan", 8)
    assert "-n" not in kcsan  # 8 vCPUs fill both host cores
    assert (truth_asked.variant, truth_asked.topologies[0].cpus) == ("kcsan", 2)
    assert kcsan_truth[kcsan_truth.index("-n") + 1] == "2"
    # the rare-writer rounds alone: one sanitizer test at a time, no second guest beside
    assert (rare_asked.variant, rare_asked.topologies[0].cpus) == ("kcsan", 2)
    assert SANITIZER in kcsan_rare
    assert "-n" not in kcsan_rare
    assert SANITIZER not in kcsan_truth
    assert not any(option in run for run in runs for option in ("--cpus", "--variant"))
    assert all(path in kcsan_truth and path in debug for path in TRUTH_TESTS)
    later = [f"images {v} {k}" for _, v, k in CI_IMAGES[1:]]
    assert events == [
        "images default 6.1", "beside: -m harness.cli.prebuild", "pytest",
        later[0], "pytest", later[1], "pytest", later[2], "pytest", later[2], "pytest",
        later[2], "pytest",
        "matrix", "fuzz", "finish", "mutants",
    ]  # fmt: skip


def _noted(events: list[str], event: str) -> int:
    events.append(event)
    return 0
