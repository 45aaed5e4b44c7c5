"""A kernel build's log and its steps: where the log goes, how far a build is, what to expect.

Each cache entry's build writes its log beside the cache's entries (`build_log_path`);
a kernel build's progress line counts its compile steps there (`STEP_PATTERN`) against
the total `expected_steps` gives: the step count of the newest earlier build of the
same arch, variant and version (kept in each manifest as ``build_steps``, or counted
from its log: `past_builds`), else an estimate, which the progress line says it is::

    steps, basis = expected_steps("arm64", "debug", past_builds(cache), "6.12")
    count_in_log(build_log_path(entry.path), STEP_PATTERN)   # harness.process
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.builder.cache import Cache, list_entries
from harness.builder.kernels import DEFAULT_VERSION, Variant
from harness.process import count_in_log

#: One compile step of the kernel build, as its log shows it (``  CC      fs/open.o``).
STEP_PATTERN = r"^\s+CC\b"
#: Steps of a full build, for a first build with nothing earlier to go by: measured
#: here with linux-source-6.1 6.1.192-2 and Debian 12's compilers (arm64 default: 828
#: before base.config left out VT, input, IPv6, ethtool netlink, PTP and the initramfs
#: decompressors but gzip; debug: 863 then, not measured since).
TYPICAL_STEPS: dict[tuple[str, Variant], int] = {
    ("arm64", "default"): 700,
    ("arm64", "debug"): 735,
    ("x86_64", "default"): 1195,
}


@dataclass(frozen=True, slots=True)
class PastBuild:
    """A finished kernel build, as far as its progress goes."""

    arch: str
    variant: str
    steps: int
    built_at: float
    version: str = DEFAULT_VERSION


def expected_steps(
    arch: str, variant: Variant, past: Sequence[PastBuild], version: str = DEFAULT_VERSION
) -> tuple[int, str]:
    """How many steps a build of ``arch``/``variant``/``version`` should take, and why.

    In order: the newest earlier build of the same arch, variant and version (another
    key: changed fragments or compiler), the typical count of that configuration, the
    newest build of the same arch, a typical count of the same arch, the typical
    arm64 default count. Anything but the first is called an estimate.
    """

    def newest(builds: Sequence[PastBuild]) -> PastBuild:
        return max(builds, key=lambda build: build.built_at)

    if same := [b for b in past if (b.arch, b.variant, b.version) == (arch, variant, version)]:
        return newest(same).steps, f"count of the previous {arch} {variant} build"
    if (arch, variant) in TYPICAL_STEPS:
        return TYPICAL_STEPS[arch, variant], f"estimate: a typical {arch} {variant} build's count"
    if same_arch := [b for b in past if b.arch == arch]:
        other = newest(same_arch)
        return other.steps, f"estimate: first {variant} build, the {arch} {other.variant} count"
    for (known, kind), typical in TYPICAL_STEPS.items():
        if known == arch:
            return typical, f"estimate: first {variant} build, a typical {arch} {kind} count"
    typical = TYPICAL_STEPS["arm64", "default"]
    return typical, f"estimate: first {arch} build, a typical arm64 default one's count"


def past_builds(cache: Cache) -> list[PastBuild]:
    """Every finished kernel build in ``cache`` whose step count is known."""
    found = []
    for entry in list_entries(cache):
        if entry.kind != "kernel" or not entry.is_complete:
            continue
        manifest, log = entry.manifest, build_log_path(entry.path)
        steps = manifest.get("build_steps") or count_in_log(log, STEP_PATTERN)  # older manifests
        if steps:
            found.append(PastBuild(manifest["arch"], manifest["variant"], int(steps),
                                   float(manifest.get("built_at", 0.0)),
                                   _series(manifest.get("version", DEFAULT_VERSION))))  # fmt: skip
    return found


def _series(version: object) -> str:
    """``6.12`` of ``6.12.117`` (a tree's manifest) or of ``6.12`` (Debian's)."""
    return ".".join(str(version).split(".")[:2])


def build_log_path(entry_path: Path) -> Path:
    """Where the build log of a cache entry goes: ``<cache>/logs/<kind>-<key>.log``."""
    return entry_path.parent.parent / "logs" / f"{entry_path.parent.name}-{entry_path.name}.log"
