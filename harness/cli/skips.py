"""Checks that did not run: which, why, and the exact command that enables each.

Some guest-tier checks need images beyond the requested guest's (the debug
kernel for the NMI-safety run under lockdep, x86_64 for the no-PMU run) and skip
while those are not in the cache. pytest shows that as one ``SKIPPED`` line each;
the end of ``invoke test`` names them beside the guests table, with the command
that builds what each needs, and ``invoke test --complete`` builds every image
the tier can use, then runs it::

    checks = skipped_checks([(nodeid, skip_reason(report.longrepr)), ...], arch="arm64")
    lines = format_skipped(checks, rerun=invoke_test_command(request, complete=True))
    missing_images(tier_images(request), present=lambda arch, variant: ...)

Everything here is pure.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from harness import arches
from harness.builder.kernel import VARIANTS, Variant, check_variant
from harness.cli.session import GuestRequest

Image = tuple[str, Variant]
#: The architecture the no-PMU checks boot, whatever guest was asked for.
NO_PMU_ARCH = "x86_64"
#: How a test says it lacks images: "no debug kernel in the cache", "no x86_64 kernel ...".
_MISSING = re.compile(r"\bno (?P<what>[\w-]+) kernel in the cache\b")
#: A command a reason quotes in backticks, with any environment it needs before it.
_COMMAND = re.compile(r"`(?P<command>(?:[A-Z][A-Z0-9_]*=\S+ )*invoke [^`]+)`")


@dataclass(frozen=True, slots=True)
class SkippedCheck:
    """One test that did not run, and what would make it run (None: nothing would)."""

    test: str
    reason: str
    command: str | None


def skip_reason(longrepr: object) -> str:
    """The reason pytest recorded for a skip (``(path, line, "Skipped: why")`` or text)."""
    text = longrepr
    if isinstance(longrepr, tuple | list) and len(longrepr) == 3:  # a list after xdist
        text = longrepr[2]
    return str(text).removeprefix("Skipped: ").strip()


def images_command(image: Image) -> str:
    """The command that builds (or reuses) ``image``: kernel and rootfs."""
    arch, variant = image
    words = ["invoke", "images"]
    words += ["--arch", arch] if arch != arches.DEFAULT_ARCH else []
    words += ["--variant", variant] if variant != "default" else []
    return shlex.join(words)


def enabling_command(reason: str, *, arch: str) -> str | None:
    """The command that makes a check skipped for ``reason`` run; None when none does.

    A missing kernel is named by variant (the requested ``arch``'s) or by
    architecture, and enabled by building that image; else the command the
    reason quotes in backticks (every guest test's skip quotes one, e.g.
    ``needs two CPUs: `invoke test --cpus 2 -k NAME` ``); else nothing.
    """
    if found := _MISSING.search(reason):
        what = found["what"]
        for variant in VARIANTS:
            if what == variant:
                return images_command((arch, variant))
        if what in arches.ARCHES:
            return images_command((what, "default"))
    if quoted := _COMMAND.search(reason):
        return quoted["command"]
    return None


def skipped_checks(skips: Iterable[tuple[str, str]], *, arch: str) -> tuple[SkippedCheck, ...]:
    """(test id, reason) pairs as `SkippedCheck` s, those that can be enabled first."""
    checks = [
        SkippedCheck(test, reason, enabling_command(reason, arch=arch)) for test, reason in skips
    ]
    return tuple(sorted(checks, key=lambda c: (c.command is None, c.test)))


def format_skipped(checks: Sequence[SkippedCheck], *, rerun: str) -> list[str]:
    """Lines for the end of a run: each check that did not run, why, and how to run it.

    ``rerun`` is the command that builds everything and runs the tier again; it is
    shown once when at least one check can be enabled.
    """
    lines: list[str] = []
    for check in checks:
        lines.append(f"{check.test}: {check.reason}")
        if check.command is not None:
            lines.append(f"    enable: {check.command}")
    if any(check.command is not None for check in checks):
        lines.append(f"all of the above that can run here: {rerun}")
    return lines


def invoke_test_command(request: GuestRequest, *, complete: bool = False) -> str:
    """``invoke test`` with the options that ask for ``request`` (defaults left out)."""
    default = GuestRequest()
    words = ["invoke", "test"]
    if request.topology:
        words += ["--topology", request.topology]
    elif request.cpus:
        words += ["--cpus", str(request.cpus)]
    if request.arch != default.arch:
        words += ["--arch", request.arch]
    if request.variant != default.variant:
        words += ["--variant", request.variant]
    if request.accel != default.accel:
        words += ["--accel", request.accel]
    if request.nmi != default.nmi:
        words += ["--nmi", "off"]
    if request.memory_mib != default.memory_mib:
        words += ["--memory", str(request.memory_mib)]
    if request.kernel_args:
        words += ["--append", " ".join(request.kernel_args)]
    if request.kernel != default.kernel:
        words += ["--kernel", request.kernel]
    if request.kernel_src:
        words += ["--kernel-src", request.kernel_src]
    return shlex.join([*words, "--complete"] if complete else words)


def tier_images(request: GuestRequest) -> tuple[Image, ...]:
    """Every image the guest tier can use for ``request``, its own first.

    Besides the requested kernel: the debug variant of the requested arch (the
    checks under lockdep and atomic-sleep debugging) and the default x86_64 one
    (the checks on a guest without a PMU).
    """
    own: Image = (request.arch, check_variant(request.variant))
    wanted: tuple[Image, ...] = (own, (request.arch, "debug"), (NO_PMU_ARCH, "default"))
    return tuple(dict.fromkeys(wanted))


def missing_images(
    images: Iterable[Image], *, present: Callable[[str, Variant], bool]
) -> tuple[Image, ...]:
    """The ``images`` that ``present`` says are not built yet, in order."""
    return tuple(image for image in images if not present(*image))
