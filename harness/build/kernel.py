"""Build the guest kernel from Debian's ``linux-source-6.1``, cached by content.

``tinyconfig`` plus the fragments in ``guest/kconfig/`` (base, the arch's own,
the arch's PMU/NMI options, and ``debug.config`` for the debug variant); after
``olddefconfig`` every requested option is verified. The build tree is kept in
the cache because the profiling agent is built against it::

    entry = build_kernel(KernelRequest(arch=arches.get("arm64")), Cache.default())
    entry.path / entry.manifest["image"]      # the bootable image
    entry.path / "build"                      # O= tree for out-of-tree modules

The key covers the source package version, every fragment's text, the
compiler's version, the arch, the variant and this recipe's version.

The compile step reports a fraction and the time left: its total is the step
count (``CC`` lines) of the newest earlier build of the same arch and variant,
kept in each manifest as ``build_steps`` (or counted from its log), else an
estimate, which the progress line says it is (`expected_steps`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.arches import ArchProfile
from harness.build.cache import Cache, CacheEntry, content_key, file_sha256, list_entries
from harness.build.kconfig import apply_fragment, merge_fragments, verify
from harness.errors import ConfigError, KconfigError
from harness.paths import GUEST_DIR
from harness.process import capture, count_in_log, count_matches, package_version, run_logged

LOG = logging.getLogger(__name__)

Variant = Literal["default", "debug"]
VARIANTS: tuple[Variant, ...] = ("default", "debug")
KERNEL_RECIPE = 2  # bump when the build steps below change their output
#: Fixed build identity, so that the same inputs give the same image bytes.
REPRODUCIBLE_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "1970-01-01 00:00:00 UTC",
    "KBUILD_BUILD_USER": "profbench",
    "KBUILD_BUILD_HOST": "profbench",
}
SOURCE_PACKAGE = "linux-source-6.1"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
KCONFIG_DIR = GUEST_DIR / "kconfig"
#: One compile step of the kernel build, as its log shows it (``  CC      fs/open.o``).
STEP_PATTERN = r"^\s+CC\b"
#: Steps of a full build, for a first build with nothing earlier to go by: measured
#: here with linux-source-6.1 6.1.192-2 and Debian 12's compilers.
TYPICAL_STEPS: dict[tuple[str, Variant], int] = {
    ("arm64", "default"): 828,
    ("arm64", "debug"): 863,
    ("x86_64", "default"): 1195,
}


@dataclass(frozen=True, slots=True)
class KernelRequest:
    """Which kernel to build."""

    arch: ArchProfile
    variant: Variant = "default"
    jobs: int = 0  # 0: one per host CPU


@dataclass(frozen=True, slots=True)
class PastBuild:
    """A finished kernel build, as far as its progress goes."""

    arch: str
    variant: str
    steps: int
    built_at: float


def expected_steps(arch: str, variant: Variant, past: Sequence[PastBuild]) -> tuple[int, str]:
    """How many steps a build of ``arch``/``variant`` should take, and on what grounds.

    In order: the newest earlier build of the same arch and variant (another key:
    changed fragments or compiler), the typical count of that configuration, the
    newest build of the same arch, a typical count of the same arch, the typical
    arm64 default count. Anything but the first is called an estimate.
    """

    def newest(builds: Sequence[PastBuild]) -> PastBuild:
        return max(builds, key=lambda build: build.built_at)

    if same := [b for b in past if (b.arch, b.variant) == (arch, variant)]:
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
                                   float(manifest.get("built_at", 0.0))))  # fmt: skip
    return found


def check_variant(name: str) -> Variant:
    """Validate a variant name from the command line.

    :raise ConfigError: unknown variant.
    """
    for variant in VARIANTS:
        if name == variant:
            return variant
    raise ConfigError(f"unknown kernel variant {name!r}; use one of: {', '.join(VARIANTS)}")


def fragment_names(arch: ArchProfile, variant: Variant) -> tuple[str, ...]:
    """The fragments applied, in order, relative to ``guest/kconfig``."""
    names = ("base.config", f"{arch.kconfig_dir}/arch.config", f"{arch.kconfig_dir}/pmu-nmi.config")
    return (*names, "debug.config") if variant == "debug" else names


def kernel_key(request: KernelRequest) -> str:
    """Cache key of ``request``; cheap (no hashing of the source tarball)."""
    compiler = capture([f"{request.arch.cross_compile}gcc", "--version"]).splitlines()[:1]
    return content_key(
        {
            "recipe": KERNEL_RECIPE,
            "source": package_version(SOURCE_PACKAGE),
            "fragments": {
                n: (KCONFIG_DIR / n).read_text()
                for n in fragment_names(request.arch, request.variant)
            },
            "compiler": compiler,
            "arch": request.arch.name,
            "variant": request.variant,
        }
    )


def find_kernel(request: KernelRequest, cache: Cache) -> CacheEntry | None:
    """The finished cached kernel for ``request``, or None."""
    entry = cache.entry("kernel", kernel_key(request))
    return entry if entry.is_complete else None


def build_kernel(request: KernelRequest, cache: Cache) -> CacheEntry:
    """Return the cached kernel for ``request``, building it if needed (minutes)."""
    entry = cache.entry("kernel", kernel_key(request))
    if entry.is_complete:
        return entry
    LOG.info("building the %s %s kernel into %s", request.arch.name, request.variant, entry.path)
    source = ensure_source(cache)
    steps = expected_steps(request.arch.name, request.variant, past_builds(cache))
    return cache.obtain(entry, lambda out: _build(request, source, out, steps))


def source_key() -> str:
    """Cache key of the unpacked kernel source: the installed package version."""
    return content_key({"package": SOURCE_PACKAGE, "version": package_version(SOURCE_PACKAGE)})


def ensure_source(cache: Cache) -> Path:
    """The unpacked ``linux-source-6.1`` tree, shared by every kernel build."""
    version = package_version(SOURCE_PACKAGE)
    if not version or not SOURCE_TARBALL.is_file():
        raise ConfigError(f"{SOURCE_TARBALL} is missing; run `invoke setup` to install it")
    entry = cache.entry("source", source_key())

    def unpack(out: Path) -> dict[str, object]:
        LOG.info("unpacking %s %s (about 10 s)", SOURCE_PACKAGE, version)
        run_logged(
            ["tar", "-xf", str(SOURCE_TARBALL), "-C", str(out)],
            log=build_log_path(out),
            what="unpacking the kernel source",
        )
        return {"package": SOURCE_PACKAGE, "version": version}

    return cache.obtain(entry, unpack).path / "linux-source-6.1"


def build_log_path(entry_path: Path) -> Path:
    """Where the build log of a cache entry goes: ``<cache>/logs/<kind>-<key>.log``."""
    return entry_path.parent.parent / "logs" / f"{entry_path.parent.name}-{entry_path.name}.log"


def _build(
    request: KernelRequest, source: Path, out: Path, steps: tuple[int, str]
) -> dict[str, object]:
    arch = request.arch
    build = out / "build"
    build.mkdir()
    log = build_log_path(out)  # outside the entry: it must survive a failed build
    log.unlink(missing_ok=True)
    jobs = request.jobs or os.cpu_count() or 1
    make = [
        "make",
        "-C",
        str(source),
        f"O={build}",
        f"ARCH={arch.linux_arch}",
        f"CROSS_COMPILE={arch.cross_compile}",
    ]
    run_logged([*make, "tinyconfig"], log=log, what="make tinyconfig", env=REPRODUCIBLE_ENV)

    names = fragment_names(arch, request.variant)
    merged = merge_fragments((n, (KCONFIG_DIR / n).read_text()) for n in names)
    for line in merged.overrides:
        LOG.info("kconfig override: %s", line)
    config = build / ".config"
    config.write_text(apply_fragment(config.read_text(), merged))
    run_logged([*make, "olddefconfig"], log=log, what="make olddefconfig", env=REPRODUCIBLE_ENV)
    if problems := verify(merged.options, config.read_text()):
        rejected = log.with_suffix(".rejected.config")
        shutil.copy(config, rejected)
        raise KconfigError(problems, rejected)

    targets = [Path(arch.kernel_image).name, "modules_prepare"]
    total, basis = steps
    LOG.info("compiling the kernel with %d jobs: %d steps expected (%s)", jobs, total, basis)
    run_logged(
        [*make, f"-j{jobs}", *targets],
        log=log,
        what="kernel build",
        progress=count_matches(STEP_PATTERN, total=total, basis=basis),
        env=REPRODUCIBLE_ENV,
    )
    image = build / arch.kernel_image
    release = capture([*make, "-s", "kernelrelease"]).strip()
    return {
        "arch": arch.name,
        "variant": request.variant,
        "source": package_version(SOURCE_PACKAGE),
        "fragments": list(names),
        "release": release,
        "image": str(image.relative_to(out)),
        "image_sha256": file_sha256(image),
        "config_sha256": file_sha256(config),
        "build_steps": count_in_log(log, STEP_PATTERN),  # the next build's expected total
    }
