"""The end of ``invoke test``: checks that did not run, and the command that enables each."""

from __future__ import annotations

import pytest

from harness.cli.session import GuestRequest
from harness.cli.skips import (
    SkippedCheck,
    enabling_command,
    format_skipped,
    invoke_test_command,
    missing_images,
    skip_reason,
    skipped_checks,
    tier_images,
)

#: The guest tier's own words when an image is missing (tests/guest/test_agent_modes.py).
DEBUG_MISSING = "no debug kernel in the cache; `invoke kernel --variant debug` builds it"
X86_MISSING = "no x86_64 kernel in the cache; `invoke kernel --arch x86_64` builds it"
X86_IMAGES = "invoke images --arch x86_64"
DEBUG_TEST = (
    "tests/guest/test_variants.py::test_debug_kernel_boots_with_lockdep_and_atomic_sleep_checks"
)
X86_TEST = "tests/guest/test_agent_modes.py::test_software_clock_where_there_is_no_pmu"
HOTPLUG_TEST = "tests/guest/test_boot.py::test_every_cpu_can_be_offlined_and_onlined[1s1cl1c1t]"


@pytest.mark.parametrize(
    "longrepr",
    [
        ("tests/guest/test_agent_modes.py", 118, f"Skipped: {DEBUG_MISSING}"),
        ["tests/guest/test_agent_modes.py", 118, f"Skipped: {DEBUG_MISSING}"],  # via xdist
        f"Skipped: {DEBUG_MISSING}",
    ],
)
def test_the_reason_is_read_from_any_form_pytest_records(longrepr: object) -> None:
    assert skip_reason(longrepr) == DEBUG_MISSING


@pytest.mark.parametrize(
    ("reason", "arch", "command"),
    [
        (DEBUG_MISSING, "arm64", "invoke images --variant debug"),
        (DEBUG_MISSING, "x86_64", "invoke images --arch x86_64 --variant debug"),
        (X86_MISSING, "arm64", X86_IMAGES),
        (X86_MISSING.replace("kernel --arch", "images --arch"), "arm64", X86_IMAGES),
        ("stale lock; `invoke rootfs --relock` updates it", "arm64", "invoke rootfs --relock"),
        ("CPU 0 is the only CPU; hotplug needs a second one", "arm64", None),
        ("x86_64 under tcg has no PMU", "x86_64", None),
    ],
)
def test_the_enabling_command_builds_kernel_and_rootfs_or_is_quoted_or_none(
    reason: str, arch: str, command: str | None
) -> None:
    assert enabling_command(reason, arch=arch) == command


def test_a_plain_run_on_a_fresh_cache_names_both_lost_checks_and_how_to_run_them() -> None:
    skips = [
        (HOTPLUG_TEST, "CPU 0 is the only CPU; hotplug needs a second one"),
        (X86_TEST, X86_MISSING),
        (DEBUG_TEST, DEBUG_MISSING),
    ]
    checks = skipped_checks(skips, arch="arm64")
    assert [c.test for c in checks] == [X86_TEST, DEBUG_TEST, HOTPLUG_TEST]  # enable-able first
    lines = format_skipped(checks, rerun=invoke_test_command(GuestRequest(cpus=8), complete=True))
    assert lines == [
        f"{X86_TEST}: {X86_MISSING}",
        "    enable: invoke images --arch x86_64",
        f"{DEBUG_TEST}: {DEBUG_MISSING}",
        "    enable: invoke images --variant debug",
        f"{HOTPLUG_TEST}: CPU 0 is the only CPU; hotplug needs a second one",
        "all of the above that can run here: invoke test --cpus 8 --complete",
    ]


def test_no_rerun_hint_when_nothing_skipped_can_be_enabled() -> None:
    checks = (SkippedCheck(HOTPLUG_TEST, "CPU 0 is the only CPU", None),)
    assert format_skipped(checks, rerun="invoke test --complete") == [
        f"{HOTPLUG_TEST}: CPU 0 is the only CPU"
    ]
    assert format_skipped((), rerun="invoke test --complete") == []


@pytest.mark.parametrize(
    ("request_", "command"),
    [
        (GuestRequest(), "invoke test"),
        (GuestRequest(cpus=8), "invoke test --cpus 8"),
        (GuestRequest(cpus=8, topology="2s2cl1c2t"), "invoke test --topology 2s2cl1c2t"),
        (GuestRequest(arch="x86_64", variant="debug", accel="tcg", nmi=False, memory_mib=2048,
                      kernel_args=("nokaslr", "loglevel=8")),
         "invoke test --arch x86_64 --variant debug --accel tcg --nmi off --memory 2048 "
         "--append 'nokaslr loglevel=8'"),
    ],
)  # fmt: skip
def test_the_rerun_command_repeats_the_options_that_differ_from_the_defaults(
    request_: GuestRequest, command: str
) -> None:
    assert invoke_test_command(request_) == command
    assert invoke_test_command(request_, complete=True) == f"{command} --complete"


@pytest.mark.parametrize(
    ("request_", "images"),
    [
        (GuestRequest(), (("arm64", "default"), ("arm64", "debug"), ("x86_64", "default"))),
        (GuestRequest(variant="debug"), (("arm64", "debug"), ("x86_64", "default"))),
        (GuestRequest(arch="x86_64"), (("x86_64", "default"), ("x86_64", "debug"))),
    ],
)
def test_a_complete_run_uses_its_own_image_the_debug_kernel_and_x86_64(
    request_: GuestRequest, images: tuple[tuple[str, str], ...]
) -> None:
    assert tier_images(request_) == images


def test_only_images_not_in_the_cache_are_missing() -> None:
    built = {("arm64", "default")}
    wanted = tier_images(GuestRequest())
    missing = missing_images(wanted, present=lambda arch, variant: (arch, variant) in built)
    assert missing == (("arm64", "debug"), ("x86_64", "default"))
