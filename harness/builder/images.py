"""The images a guest boots, from the cache, and the ``images/`` view of them.

`prepare_images` builds (or finds) the kernel and the initramfs for an arch,
variant and kernel (a Debian version or a developer's tree), and points
``images/<arch>-<variant>-<kernel>/`` at them with links plus a ``manifest.json``,
so a person can see what the current build is::

    images = prepare_images(arches.get("arm64"), "default", Cache.default())
    images = prepare_images(arm64, "debug", cache, kernel=KernelChoice("6.12"))
    images.files            # BootFiles(kernel=..., initrd=...)
    images.record()         # hashes and versions for run.json

``images/`` holds only links and manifests (git ignores it); the bytes live in
the content-addressed cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.arches import ArchProfile
from harness.builder.cache import (
    Cache,
    write_json_atomic,
)
from harness.builder.kernel import (
    DEFAULT_KERNEL,
    KernelChoice,
    KernelRequest,
    Variant,
    build_kernel,
)
from harness.builder.kernels import DEFAULT_VERSION, get_version
from harness.builder.kerneltree import tree_version_text
from harness.builder.keys import ensure_keypair
from harness.builder.rootfs import ROOTFS_FILE, build_rootfs
from harness.paths import IMAGES_DIR
from harness.process import package_version

Origin = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class BootFiles:
    """The kernel image and initramfs a guest boots."""

    kernel: Path
    initrd: Path


@dataclass(frozen=True, slots=True)
class GuestImages:
    """Bootable files for one arch and kernel variant, with their identities."""

    arch: ArchProfile
    variant: Variant
    files: BootFiles
    kernel_build: Path  # the O= tree, for out-of-tree modules
    ssh_key: Path
    kernel_key: str
    kernel_release: str
    kernel_sha256: str
    config_sha256: str
    rootfs_key: str
    rootfs_sha256: str
    kernel_version: str = DEFAULT_VERSION  # "6.12"; a tree's Makefile version for --kernel-src
    #: where the kernel came from: package and source, or tree and commit or content hash
    kernel_origin: Origin = ()
    #: locked rootfs packages Debian no longer serves, and the version used instead
    #: ("linux-perf: locked 6.1.192-2, Debian now serves 6.1.192-3"): a point release,
    #: recorded here and in the rootfs manifest, never a warning (`harness.builder.rootfs`)
    rootfs_lock_drift: tuple[str, ...] = ()

    @property
    def vmlinux(self) -> Path:
        """The guest kernel unstripped, with its symbols (frames and kernel truth)."""
        return self.kernel_build / "vmlinux"

    @property
    def kernel_name(self) -> str:
        """How reports name the kernel: ``6.12 (linux-source-6.12 6.12.117-1~deb12u1)``."""
        return kernel_name(self.kernel_version, self.kernel_origin)

    def record(self) -> dict[str, object]:
        """Identities for run.json."""
        return {
            "arch": self.arch.name,
            "variant": self.variant,
            "kernel_version": self.kernel_version,
            "kernel_origin": dict(self.kernel_origin),
            "kernel_name": self.kernel_name,
            "kernel": str(self.files.kernel),
            "kernel_key": self.kernel_key,
            "kernel_release": self.kernel_release,
            "kernel_sha256": self.kernel_sha256,
            "config_sha256": self.config_sha256,
            "rootfs": str(self.files.initrd),
            "rootfs_key": self.rootfs_key,
            "rootfs_sha256": self.rootfs_sha256,
            "rootfs_lock_drift": list(self.rootfs_lock_drift),
        }


def kernel_name(version: str, pairs: Origin) -> str:
    """A kernel as reports name it: version, then its package or its tree and revision."""
    origin = dict(pairs)
    if "tree" in origin:
        revision = origin.get("commit") or f"content {origin.get('content', '?')}"
        return f"{version} (tree {origin['tree']} at {revision})"
    if "package" in origin:
        return f"{version} ({origin['package']} {origin.get('source', '')})".replace(" )", ")")
    return version


def debian_kernel_name(version: str) -> str:
    """How reports name Debian's kernel ``version`` as installed here (no build needed)."""
    package = get_version(version).package
    return kernel_name(version, (("package", package), ("source", package_version(package))))


def describe_kernel(kernel: KernelChoice) -> str:
    """How reports name a kernel before it is built: Debian's with its version, or the tree."""
    if kernel.tree:  # its content hash is known once hashed: run.json has it
        return f"{tree_version_text(kernel.tree)} (tree {kernel.tree})"
    return debian_kernel_name(kernel.version)


def kernel_identity(manifest: dict[str, Any]) -> tuple[str, Origin]:
    """The version and origin a kernel cache manifest records (older ones: the 6.1 package)."""
    version = str(manifest.get("version", DEFAULT_VERSION))
    if "tree" in manifest:
        keys = ("tree", "commit", "content", "dirty")
        return version, tuple((k, str(manifest[k])) for k in keys if manifest.get(k))
    package = str(manifest.get("package", "linux-source-6.1"))
    return version, (("package", package), ("source", str(manifest.get("source", ""))))


def prepare_images(
    arch: ArchProfile,
    variant: Variant,
    cache: Cache,
    *,
    jobs: int = 0,
    kernel: KernelChoice = DEFAULT_KERNEL,
) -> GuestImages:
    """Kernel and initramfs for ``arch``/``variant``/``kernel``, built if not cached."""
    keypair = ensure_keypair(cache.root / "ssh")
    built = build_kernel(KernelRequest(arch=arch, variant=variant, jobs=jobs, kernel=kernel), cache)
    version, origin = kernel_identity(built.manifest)
    rootfs = build_rootfs(arch, cache, keypair)
    km, rm = built.manifest, rootfs.manifest
    images = GuestImages(
        arch=arch,
        variant=variant,
        files=BootFiles(kernel=built.path / km["image"], initrd=rootfs.path / ROOTFS_FILE),
        kernel_build=built.path / "build",
        ssh_key=keypair.private_key,
        kernel_key=built.key,
        kernel_release=km["release"],
        kernel_sha256=km["image_sha256"],
        config_sha256=km["config_sha256"],
        rootfs_key=rootfs.key,
        rootfs_sha256=rm["sha256"],
        kernel_version=version,
        kernel_origin=origin,
        rootfs_lock_drift=tuple(rm.get("lock_drift", ())),
    )
    publish(images, label=kernel.label)
    return images


def publish(images: GuestImages, root: Path = IMAGES_DIR, *, label: str | None = None) -> Path:
    """Point ``root/<arch>-<variant>-<kernel>/`` at the cached files; write its manifest."""
    view = root / f"{images.arch.name}-{images.variant}-{label or images.kernel_version}"
    view.mkdir(parents=True, exist_ok=True)
    links = {
        "kernel": images.files.kernel,
        "rootfs.cpio": images.files.initrd,
        "kernel-build": images.kernel_build,
        "ssh-key": images.ssh_key,
    }
    for name, target in links.items():
        _replace_link(view / name, target)
    write_json_atomic(view / "manifest.json", images.record())
    return view


def _replace_link(link: Path, target: Path) -> None:
    if link.is_symlink() and os.readlink(link) == str(target):
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(link)
