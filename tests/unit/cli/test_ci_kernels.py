"""What ``invoke ci`` builds and runs on each kernel version."""

from __future__ import annotations

from harness import arches
from harness.build.kernels import VARIANTS, VERSIONS
from harness.cli.testrun import CI_IMAGES, CI_NEWER_KERNEL, CI_SANITIZER_RUNS, guest_options
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
