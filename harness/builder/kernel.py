"""Build the guest kernel from a Debian ``linux-source-X.Y`` package, cached by content.

``tinyconfig`` plus the fragments in ``guest/kconfig/`` (base, the arch's own,
the arch's PMU/NMI options, the version's own (`harness.builder.kernels`), and the
variant's, e.g. ``debug.config``); after ``olddefconfig`` every requested option
is verified. The build tree is kept in the cache because the profiling agent is
built against it::

    entry = build_kernel(KernelRequest(arch=arches.get("arm64")), Cache.default())
    entry = build_kernel(KernelRequest(arch=arm64, kernel=KernelChoice("6.12")), cache)
    entry.path / entry.manifest["image"]      # the bootable image
    entry.path / "build"                      # O= tree for out-of-tree modules

The key covers the source package's version (``6.1.192-2``, ``6.12.117-1~deb12u1``:
it names the kernel version), every fragment's text, the compiler's version, the
arch, the variant and this recipe's version. A developer's own tree
(``KernelChoice(tree=...)``) is keyed by its content instead (`harness.builder.kerneltree`).

The compile step reports a fraction and the time left: its total is the step
count (``CC`` lines) of the newest earlier build of the same arch, variant and
version, kept in each manifest as ``build_steps`` (or counted from its log), else
an estimate, which the progress line says it is (`harness.builder.kernelsteps`, which
also says where each build's log goes).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness.arches import ArchProfile
from harness.builder.cache import (
    Cache,
    CacheEntry,
    content_key,
    file_sha256,
    holding,
)
from harness.builder.kconfig import apply_fragment, merge_fragments, verify
from harness.builder.kernels import (
    DEFAULT_VERSION,
    VARIANT_MAKE_VARS,
    VARIANTS,
    KernelVersion,
    Variant,
    check_variant,
    fragment_names,
    get_version,
)
from harness.builder.kernelsteps import (
    STEP_PATTERN,
    build_log_path,
    expected_steps,
    past_builds,
)
from harness.builder.kerneltree import (
    TreeIdentity,
    check_buildable,
    missing_options,
    tree_identity,
    tree_release,
    tree_version_text,
)
from harness.errors import ConfigError, KconfigError
from harness.paths import GUEST_DIR
from harness.process import capture, count_in_log, count_matches, package_version, run_logged

LOG = logging.getLogger(__name__)

__all__ = ["VARIANTS", "KernelChoice", "KernelRequest", "Variant", "check_variant"]

KERNEL_RECIPE = 2  # bump when the build steps below change their output
#: Fixed build identity, so that the same inputs give the same image bytes.
REPRODUCIBLE_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "1970-01-01 00:00:00 UTC",
    "KBUILD_BUILD_USER": "profbench",
    "KBUILD_BUILD_HOST": "profbench",
}
KCONFIG_DIR = GUEST_DIR / "kconfig"


@dataclass(frozen=True, slots=True)
class KernelChoice:
    """Which kernel source: a Debian package's version, or (``tree``) a developer's tree."""

    version: str = DEFAULT_VERSION  # a key of harness.builder.kernels.VERSIONS
    tree: Path | None = None  # --kernel-src: this tree instead of the package

    @property
    def label(self) -> str:
        """Short name for paths and logs: ``6.12``, or ``src`` for a tree."""
        return "src" if self.tree else self.version


DEFAULT_KERNEL = KernelChoice()


@dataclass(frozen=True, slots=True)
class KernelRequest:
    """Which kernel to build."""

    arch: ArchProfile
    variant: Variant = "default"
    jobs: int = 0  # 0: one per host CPU
    kernel: KernelChoice = field(default_factory=KernelChoice)


def kernel_key(request: KernelRequest, cache: Cache | None = None) -> str:
    """Cache key of ``request``; cheap (no hashing of the source tarball).

    A developer's tree is keyed by its content instead of a package version
    (`harness.builder.kerneltree`; ``cache`` keeps its stat cache).

    :raise ConfigError: unknown kernel version.
    """
    if request.kernel.tree is not None:
        return _tree_key(request, tree_identity(request.kernel.tree, cache or Cache.default()))
    version = get_version(request.kernel.version)
    compiler = _compiler(request.arch)
    return content_key(
        {
            "recipe": KERNEL_RECIPE,
            "source": package_version(version.package),
            "fragments": {
                n: (KCONFIG_DIR / n).read_text()
                for n in fragment_names(request.arch, request.variant, version.release)
            },
            "compiler": compiler,
            "arch": request.arch.name,
            "variant": request.variant,
            **_make_vars(request.variant),
        }
    )


def _tree_key(request: KernelRequest, identity: TreeIdentity) -> str:
    release = tree_release(identity.path)
    return content_key(
        {
            "recipe": KERNEL_RECIPE,
            "tree": identity.content,
            "fragments": {
                n: (KCONFIG_DIR / n).read_text()
                for n in fragment_names(request.arch, request.variant, release)
            },
            "compiler": _compiler(request.arch),
            "arch": request.arch.name,
            "variant": request.variant,
            **_make_vars(request.variant),
        }
    )


def _make_vars(variant: Variant) -> dict[str, tuple[str, ...]]:
    """The variant's make variables for its key; none: no key entry (keys made before stay)."""
    found = VARIANT_MAKE_VARS[variant]
    return {"make_vars": found} if found else {}


def _compiler(arch: ArchProfile) -> list[str]:
    return capture([f"{arch.cross_compile}gcc", "--version"]).splitlines()[:1]


def find_kernel(request: KernelRequest, cache: Cache) -> CacheEntry | None:
    """The finished cached kernel for ``request``, or None."""
    entry = cache.entry("kernel", kernel_key(request, cache))
    return entry if entry.is_complete else None


def build_kernel(request: KernelRequest, cache: Cache) -> CacheEntry:
    """Return the cached kernel for ``request``, building it if needed (minutes).

    :raise ConfigError: the version is unknown or its package is not installed.
    :raise KconfigError: a requested option did not survive ``olddefconfig``.
    """
    if request.kernel.tree is not None:
        return _build_from_tree(request, request.kernel.tree, cache)
    entry = cache.entry("kernel", kernel_key(request))
    version = get_version(request.kernel.version)
    if entry.is_complete:
        # Modules build against the O= tree, which needs its source beside it; a kernel
        # restored alone (CI's actions/cache) gets it unpacked again here (about 15 s).
        return ensure_symvers(entry, request, ensure_source(cache, version))
    LOG.info("building the %s %s %s kernel into %s", request.arch.name, version.name,
             request.variant, entry.path)  # fmt: skip
    source = ensure_source(cache, version)
    steps = expected_steps(request.arch.name, request.variant, past_builds(cache), version.name)
    recipe = BuildRecipe(source, fragment_names(request.arch, request.variant, version.release),
                         {"version": version.name, "source": package_version(version.package),
                          "package": version.package})  # fmt: skip
    return cache.obtain(entry, lambda out: build_tree(request, recipe, out, steps))


def _build_from_tree(request: KernelRequest, tree: Path, cache: Cache) -> CacheEntry:
    """A developer's tree: hashed, checked for every option first, then built like Debian's.

    :raise ConfigError: the tree has in-tree build output, or lacks an option the
        fragments ask for (each named, with why the bench needs it).
    """
    identity = tree_identity(tree, cache)
    entry = cache.entry("kernel", _tree_key(request, identity))
    if entry.is_complete:
        return ensure_symvers(entry, request, tree)
    check_buildable(tree)
    names = fragment_names(request.arch, request.variant, tree_release(tree))
    merged = merge_fragments((n, (KCONFIG_DIR / n).read_text()) for n in names)
    if problems := missing_options(tree, request.arch.linux_arch, merged.options):
        raise ConfigError(f"--kernel-src {tree} cannot build the bench's kernel:\n  "
                          + "\n  ".join(problems))  # fmt: skip
    facts = {"version": tree_version_text(tree), "tree": str(tree), "content": identity.content,
             "commit": identity.commit or "", "dirty": "yes" if identity.dirty else ""}  # fmt: skip
    LOG.info("building %s (%s) for %s %s into %s", tree, identity.content, request.arch.name,
             request.variant, entry.path)  # fmt: skip
    release = ".".join(map(str, tree_release(tree)))  # a 6.12 tree builds like Debian's 6.12
    steps = expected_steps(request.arch.name, request.variant, past_builds(cache), release)
    recipe = BuildRecipe(tree, names, facts)
    return cache.obtain(entry, lambda out: build_tree(request, recipe, out, steps))


def ensure_symvers(entry: CacheEntry, request: KernelRequest, source: Path) -> CacheEntry:
    """Give a finished kernel its ``Module.symvers`` if it lacks one; return ``entry``.

    Without it modpost links an out-of-tree module blind: 6.1 only warns about every
    symbol, 6.12 refuses them all. With it, modpost checks each symbol the agent uses
    against what the kernel exports. New builds make it with the image (the
    ``modules`` target); entries built before that get it here (``make modules`` on
    the finished tree, about 20 s; the image's bytes do not change, so the key and
    every agent and snapshot key stay: no team-wide rebuild). Hack, admitted: this
    amends a finished cache entry in place, under its lock.
    """
    symvers = entry.path / "build" / "Module.symvers"
    if symvers.is_file():
        return entry
    with holding(entry):
        if not symvers.is_file():
            LOG.info("adding Module.symvers to %s (make modules, about 20 s)", entry.path)
            make = _make(request, source, entry.path / "build")
            jobs = f"-j{os.cpu_count() or 1}"
            run_logged([*make, jobs, "modules"], log=build_log_path(entry.path),
                       what="make modules (Module.symvers)", env=REPRODUCIBLE_ENV)  # fmt: skip
    return entry


def _make(request: KernelRequest, source: Path, build: Path) -> list[str]:
    arch = request.arch
    return ["make", "-C", str(source), f"O={build}", f"ARCH={arch.linux_arch}",
            f"CROSS_COMPILE={arch.cross_compile}", *VARIANT_MAKE_VARS[request.variant]]  # fmt: skip


def source_key(version: KernelVersion | None = None) -> str:
    """Cache key of the unpacked kernel source: the installed package version."""
    package = (version or get_version(DEFAULT_VERSION)).package
    return content_key({"package": package, "version": package_version(package)})


def ensure_source(cache: Cache, version: KernelVersion | None = None) -> Path:
    """The unpacked source tree of ``version`` (default 6.1), shared by its kernel builds.

    :raise ConfigError: the package is not installed.
    """
    version = version or get_version(DEFAULT_VERSION)
    installed = package_version(version.package)
    if not installed or not version.tarball.is_file():
        raise ConfigError(f"{version.tarball} is missing; run `invoke setup` to install it")
    entry = cache.entry("source", source_key(version))

    def unpack(out: Path) -> dict[str, object]:
        LOG.info("unpacking %s %s (about 15 s)", version.package, installed)
        run_logged(
            ["tar", "-xf", str(version.tarball), "-C", str(out)],
            log=build_log_path(out),
            what="unpacking the kernel source",
        )
        return {"package": version.package, "version": installed}

    return cache.obtain(entry, unpack).path / version.tree_name


@dataclass(frozen=True, slots=True)
class BuildRecipe:
    """A source tree, the fragments to apply to it, and facts for the manifest."""

    source: Path
    fragments: tuple[str, ...]
    facts: dict[str, str]


def build_tree(
    request: KernelRequest, recipe: BuildRecipe, out: Path, steps: tuple[int, str]
) -> dict[str, object]:
    """Configure and build ``recipe.source`` out of tree into ``out/build``; manifest facts.

    Blocks for the build (minutes).

    :raise KconfigError: a requested option did not survive ``olddefconfig``.
    :raise BuildError: a make step failed.
    """
    arch = request.arch
    build = out / "build"
    build.mkdir()
    log = build_log_path(out)  # outside the entry: it must survive a failed build
    log.unlink(missing_ok=True)
    jobs = request.jobs or os.cpu_count() or 1
    make = _make(request, recipe.source, build)
    run_logged([*make, "tinyconfig"], log=log, what="make tinyconfig", env=REPRODUCIBLE_ENV)

    merged = merge_fragments((n, (KCONFIG_DIR / n).read_text()) for n in recipe.fragments)
    for line in merged.overrides:
        LOG.info("kconfig override: %s", line)
    config = build / ".config"
    config.write_text(apply_fragment(config.read_text(), merged))
    run_logged([*make, "olddefconfig"], log=log, what="make olddefconfig", env=REPRODUCIBLE_ENV)
    if problems := verify(merged.options, config.read_text()):
        rejected = log.with_suffix(".rejected.config")
        shutil.copy(config, rejected)
        raise KconfigError(problems, rejected)
    LOG.info("all %d requested options are in the final .config", len(merged.options))

    # modules: no module is configured, but it writes Module.symvers, which modpost
    # needs to check the agent's symbols against the kernel's exports.
    targets = [Path(arch.kernel_image).name, "modules_prepare", "modules"]
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
        **recipe.facts,
        "arch": arch.name,
        "variant": request.variant,
        "fragments": list(recipe.fragments),
        "options_verified": len(merged.options),
        "release": release,
        "image": str(image.relative_to(out)),
        "image_sha256": file_sha256(image),
        "config_sha256": file_sha256(config),
        "build_steps": count_in_log(log, STEP_PATTERN),  # the next build's expected total
    }
