"""The images a guest boots, from the cache, and the ``images/`` view of them.

`prepare_images` builds (or finds) the kernel and the initramfs for an arch and
variant, and points ``images/<arch>-<variant>/`` at them with links plus a
``manifest.json``, so a person can see what the current build is::

    images = prepare_images(arches.get("arm64"), "default", Cache.default())
    images.files            # BootFiles(kernel=..., initrd=...)
    images.record()         # hashes and versions for run.json

``images/`` holds only links and manifests (git ignores it); the bytes live in
the content-addressed cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.arches import ArchProfile
from harness.build.cache import (
    Cache,
    write_json_atomic,
)
from harness.build.kernel import (
    KernelRequest,
    Variant,
    build_kernel,
)
from harness.build.keys import ensure_keypair
from harness.build.rootfs import ROOTFS_FILE, build_rootfs
from harness.paths import IMAGES_DIR


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

    def record(self) -> dict[str, object]:
        """Identities for run.json."""
        return {
            "arch": self.arch.name,
            "variant": self.variant,
            "kernel": str(self.files.kernel),
            "kernel_key": self.kernel_key,
            "kernel_release": self.kernel_release,
            "kernel_sha256": self.kernel_sha256,
            "config_sha256": self.config_sha256,
            "rootfs": str(self.files.initrd),
            "rootfs_key": self.rootfs_key,
            "rootfs_sha256": self.rootfs_sha256,
        }


def prepare_images(
    arch: ArchProfile, variant: Variant, cache: Cache, *, jobs: int = 0
) -> GuestImages:
    """Kernel and initramfs for ``arch``/``variant``, built if not cached."""
    keypair = ensure_keypair(cache.root / "ssh")
    kernel = build_kernel(KernelRequest(arch=arch, variant=variant, jobs=jobs), cache)
    rootfs = build_rootfs(arch, cache, keypair)
    km, rm = kernel.manifest, rootfs.manifest
    images = GuestImages(
        arch=arch,
        variant=variant,
        files=BootFiles(kernel=kernel.path / km["image"], initrd=rootfs.path / ROOTFS_FILE),
        kernel_build=kernel.path / "build",
        ssh_key=keypair.private_key,
        kernel_key=kernel.key,
        kernel_release=km["release"],
        kernel_sha256=km["image_sha256"],
        config_sha256=km["config_sha256"],
        rootfs_key=rootfs.key,
        rootfs_sha256=rm["sha256"],
    )
    publish(images)
    return images


def publish(images: GuestImages, root: Path = IMAGES_DIR) -> Path:
    """Point ``root/<arch>-<variant>/`` at the cached files; write its manifest."""
    view = root / f"{images.arch.name}-{images.variant}"
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
