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
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.arches import ArchProfile
from harness.build.cache import Cache, CacheEntry, content_key, file_sha256
from harness.build.kconfig import apply_fragment, merge_fragments, verify
from harness.errors import ConfigError, KconfigError
from harness.paths import GUEST_DIR
from harness.process import capture, count_matches, package_version, run_logged

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


@dataclass(frozen=True, slots=True)
class KernelRequest:
    """Which kernel to build."""

    arch: ArchProfile
    variant: Variant = "default"
    jobs: int = 0  # 0: one per host CPU


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
    return cache.obtain(entry, lambda out: _build(request, source, out))


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


def _build(request: KernelRequest, source: Path, out: Path) -> dict[str, object]:
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
    LOG.info("compiling the kernel with %d jobs (a few minutes on a cold cache)", jobs)
    run_logged(
        [*make, f"-j{jobs}", *targets],
        log=log,
        what="kernel build",
        progress=count_matches(r"^\s+CC\b"),
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
    }
