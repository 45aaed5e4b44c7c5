"""What the kernel and rootfs builds expect, for their progress lines, and how they count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.builder.cache import Cache
from harness.builder.kernelsteps import (
    STEP_PATTERN,
    TYPICAL_STEPS,
    PastBuild,
    build_log_path,
    expected_steps,
    past_builds,
)
from harness.builder.rootfs import TYPICAL_ROOTFS_S, expected_build_s
from harness.process import count_in_log, count_matches

LOG_TEXT = """$ make -j2 Image modules_prepare
  HOSTCC  scripts/basic/fixdep
  CC      init/main.o
  CC      kernel/fork.o
  AS      arch/arm64/kernel/entry.o
  CC      mm/slub.o
  LD      vmlinux
"""


def test_the_kernel_log_counts_compile_steps_only(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LOG_TEXT)
    assert count_in_log(log, STEP_PATTERN) == 3
    assert count_in_log(tmp_path / "none.log", STEP_PATTERN) == 0


def test_the_progress_probe_reads_the_log_against_the_expected_total(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(LOG_TEXT)
    probe = count_matches(STEP_PATTERN, total=6, basis="count of the previous arm64 default build")
    assert probe(log, 30.0) == (
        "3/6 steps (50%), about 30 s left (count of the previous arm64 default build)"
    )


def build(arch: str, variant: str, steps: int, at: float) -> PastBuild:
    return PastBuild(arch, variant, steps, at)


def test_the_previous_build_of_the_same_configuration_wins() -> None:
    past = [build("arm64", "debug", 900, 1.0), build("arm64", "debug", 950, 2.0),
            build("arm64", "default", 828, 3.0)]  # fmt: skip
    assert expected_steps("arm64", "debug", past) == (
        950, "count of the previous arm64 debug build")  # fmt: skip


def test_a_first_build_estimates_and_says_so() -> None:
    typical = TYPICAL_STEPS["arm64", "debug"]
    assert expected_steps("arm64", "debug", [build("arm64", "default", 800, 1.0)]) == (
        typical, "estimate: a typical arm64 debug build's count")  # fmt: skip
    assert expected_steps("x86_64", "debug", [build("x86_64", "default", 1100, 1.0)]) == (
        1100, "estimate: first debug build, the x86_64 default count")  # fmt: skip
    assert expected_steps("x86_64", "debug", []) == (
        TYPICAL_STEPS["x86_64", "default"], "estimate: first debug build, a typical x86_64 "
                                            "default count")  # fmt: skip
    steps, basis = expected_steps("riscv64", "default", [build("arm64", "default", 800, 1.0)])
    assert (steps, basis) == (TYPICAL_STEPS["arm64", "default"], "estimate: first riscv64 build, "
                              "a typical arm64 default one's count")  # fmt: skip


def finished_kernel(cache: Cache, key: str, manifest: dict[str, object], log: str | None) -> None:
    entry = cache.entry("kernel", key)
    entry.path.mkdir(parents=True)
    entry.manifest_path.write_text(json.dumps(manifest))
    if log is not None:
        build_log_path(entry.path).parent.mkdir(parents=True, exist_ok=True)
        build_log_path(entry.path).write_text(log)


def test_past_builds_come_from_manifests_or_else_from_their_logs(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    base = {"arch": "arm64", "variant": "default", "built_at": 5.0}
    finished_kernel(cache, "new", {**base, "build_steps": 828}, None)
    finished_kernel(cache, "old", {**base, "variant": "debug"}, LOG_TEXT)  # before build_steps
    finished_kernel(cache, "nolog", {**base, "arch": "x86_64"}, None)  # nothing to count
    (tmp_path / "kernel" / "unfinished").mkdir()
    assert sorted(past_builds(cache), key=lambda b: b.variant) == [
        PastBuild("arm64", "debug", 3, 5.0),
        PastBuild("arm64", "default", 828, 5.0),
    ]


@pytest.mark.parametrize(
    ("past", "expected"),
    [
        ([], (TYPICAL_ROOTFS_S, "estimate: a typical rootfs build's time")),
        ([{"arch": "arm64", "built_at": 1.0}],  # built before builds were timed
         (TYPICAL_ROOTFS_S, "estimate: a typical rootfs build's time")),
        ([{"arch": "arm64", "built_at": 1.0, "build_s": 30.5},
          {"arch": "arm64", "built_at": 2.0, "build_s": 11.2},
          {"arch": "x86_64", "built_at": 3.0, "build_s": 50.0}],
         (11.2, "time of the previous arm64 rootfs build")),
    ],
)  # fmt: skip
def test_a_rootfs_build_expects_the_time_of_the_previous_one(
    past: list[dict[str, object]], expected: tuple[float, str]
) -> None:
    assert expected_build_s("arm64", past) == expected
