"""Which guest kernels the bench builds, as data: versions and variants (pure).

Two axes, orthogonal. A *version* is a Debian ``linux-source-X.Y`` package plus
the fragments that version needs beyond the common ones; a *variant* (default,
debug...) is a set of fragments applied on top of any version. A kernel is
``tinyconfig`` + common fragments + the version's fragments for the arch + the
variant's fragments, in that order::

    version = get_version("6.12")
    version.tarball                       # /usr/src/linux-source-6.12.tar.xz
    fragment_names(arm64, "debug", version.release)
    # ('base.config', 'arm64/arch.config', 'arm64/pmu-nmi.config',
    #  'arm64/pmu-6.12.config', 'debug.config')

Adding a variant is one fragment file in ``guest/kconfig/`` plus one entry in
`VARIANT_FRAGMENTS` (and its word in `Variant`); adding a version is one entry in
`VERSIONS`, plus a `VERSION_FRAGMENTS` entry and its file when it needs options older
kernels lack (keyed by the release that introduced them, so a developer's tree of
any release gets the right ones too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.arches import ArchProfile
from harness.errors import ConfigError

Variant = Literal["default", "debug", "kcsan"]
#: Each variant's fragments (relative to ``guest/kconfig``), applied after the version's.
VARIANT_FRAGMENTS: dict[Variant, tuple[str, ...]] = {
    "default": (),
    "debug": ("debug.config",),
    "kcsan": ("kcsan.config",),
}
VARIANTS: tuple[Variant, ...] = tuple(VARIANT_FRAGMENTS)
#: Each variant's variables on make's command line, beside its fragments (part of its
#: cache key). The kcsan kernel compiles none of its own code with KCSAN's
#: instrumentation: the runtime is in, and the agent, built against it out of tree,
#: is instrumented. The bench judges the port, and 6.1's instrumented kernel showed
#: benign races of its own that no run had shown before in every run of the guest
#: tier (1-4 a run, 4 runs: tick-sched, virtio_ring, napi, /proc, the dcache; none
#: with an agent frame), so the tier could never pass. The agent's races with itself
#: (its NMI producer against its reader, swap or teardown) are seen as before; a
#: race of the agent's access with the kernel's shows as a race of unknown origin
#: (the agent's watchpoint sees the value change: KCSAN_REPORT_RACE_UNKNOWN_ORIGIN).
VARIANT_MAKE_VARS: dict[Variant, tuple[str, ...]] = {
    "default": (),
    "debug": (),
    "kcsan": ("KCSAN_SANITIZE=n",),
}


@dataclass(frozen=True, slots=True)
class VersionFragment:
    """A fragment only kernels from ``since`` on take (an option that appeared there)."""

    arch: str  # arch name
    name: str  # relative to guest/kconfig
    since: tuple[int, int]  # first (version, patchlevel) that needs it
    why: str


#: Fragments by kernel release, for Debian's packages and developers' trees alike.
VERSION_FRAGMENTS: tuple[VersionFragment, ...] = (
    VersionFragment(
        arch="arm64",
        name="arm64/pmu-6.12.config",
        since=(6, 4),
        why="6.4 moved the arm64 PMUv3 driver to drivers/perf/arm_pmuv3.c under ARM_PMUV3",
    ),
)


@dataclass(frozen=True, slots=True)
class KernelVersion:
    """One Debian kernel source package."""

    name: str  # what --kernel takes: "6.1"
    package: str  # the Debian package that installs the tarball
    release: tuple[int, int]  # (version, patchlevel)

    @property
    def tarball(self) -> Path:
        """Where the package installs the source."""
        return Path("/usr/src") / f"{self.package}.tar.xz"

    @property
    def tree_name(self) -> str:
        """The top directory inside the tarball."""
        return self.package


VERSIONS: dict[str, KernelVersion] = {
    "6.1": KernelVersion(name="6.1", package="linux-source-6.1", release=(6, 1)),
    "6.12": KernelVersion(name="6.12", package="linux-source-6.12", release=(6, 12)),
}
DEFAULT_VERSION = "6.1"


def get_version(name: str) -> KernelVersion:
    """The version called ``name`` on the command line.

    :raise ConfigError: no such version; the message lists the known ones.
    """
    if name in VERSIONS:
        return VERSIONS[name]
    raise ConfigError(f"unknown kernel version {name!r}; use one of: {', '.join(VERSIONS)}")


def check_variant(name: str) -> Variant:
    """Validate a variant name from the command line.

    :raise ConfigError: unknown variant.
    """
    for variant in VARIANTS:
        if name == variant:
            return variant
    raise ConfigError(f"unknown kernel variant {name!r}; use one of: {', '.join(VARIANTS)}")


def fragment_names(
    arch: ArchProfile, variant: Variant, release: tuple[int, int]
) -> tuple[str, ...]:
    """The fragments for a kernel of ``release`` (e.g. (6, 12)), in order, under guest/kconfig."""
    common = (
        "base.config",
        f"{arch.kconfig_dir}/arch.config",
        f"{arch.kconfig_dir}/pmu-nmi.config",
    )
    own = tuple(f.name for f in VERSION_FRAGMENTS if f.arch == arch.name and release >= f.since)
    return (*common, *own, *VARIANT_FRAGMENTS[variant])
