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

from harness.arches import ARCHES, ArchProfile
from harness.cache import (
    Cache,
    CacheEntry,
    entry_size_bytes,
    list_entries,
    remove_entry,
    write_json_atomic,
)
from harness.kernel import VARIANTS, KernelRequest, Variant, build_kernel, kernel_key, source_key
from harness.keys import ensure_keypair
from harness.paths import IMAGES_DIR
from harness.qemu.argv import BootFiles
from harness.rootfs import ROOTFS_FILE, build_rootfs, rootfs_key


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
        "rootfs.cpio.gz": images.files.initrd,
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


@dataclass(frozen=True, slots=True)
class CacheListing:
    """One cache entry as ``invoke cache`` shows it."""

    entry: CacheEntry
    size_bytes: int
    finished: bool
    current: bool  # what today's tree would build (else stale: left from older inputs)


def current_keys(cache: Cache) -> set[str]:
    """Keys the current tree builds: every arch and variant, rootfs, kernel source.

    The agent counts with its default spec (other specs are cheap to rebuild).
    """
    # Imported here: the agent's build depends on this module's GuestImages.
    from harness.agent.build import agent_key  # noqa: PLC0415
    from harness.agent.profctl import profctl_key  # noqa: PLC0415
    from harness.agent.spec import AgentSpec  # noqa: PLC0415

    keypair = ensure_keypair(cache.root / "ssh")
    keys = {source_key()}
    for arch in ARCHES.values():
        keys.add(rootfs_key(arch, keypair))
        kernels = [kernel_key(KernelRequest(arch=arch, variant=v)) for v in VARIANTS]
        keys.update(kernels)
        keys.update(agent_key(AgentSpec(), kernel) for kernel in kernels)
        if profctl := profctl_key(arch):
            keys.add(profctl)
    return keys


def survey_cache(cache: Cache) -> list[CacheListing]:
    """Every cache entry with its size and whether the current tree still uses it."""
    current = current_keys(cache)
    return [
        CacheListing(e, entry_size_bytes(e), e.is_complete, e.key in current)
        for e in list_entries(cache)
    ]


def prune_cache(cache: Cache) -> list[CacheListing]:
    """Remove entries the current tree no longer builds (and unfinished ones); return them."""
    removed = [item for item in survey_cache(cache) if not (item.current and item.finished)]
    for item in removed:
        remove_entry(item.entry)
    return removed


def format_listing(items: list[CacheListing], root: Path, *, pruned: bool) -> str:
    """A table of cache entries for people."""
    lines = [f"cache: {root}" + ("  (removed:)" if pruned else "")]
    for item in items:
        state = "current" if item.current else "stale"
        state += "" if item.finished else ", unfinished"
        lines.append(f"  {item.entry.kind:<7} {item.entry.key}  {item.size_bytes / 2**20:8.1f} MiB"
                     f"  {state}")  # fmt: skip
    total = sum(item.size_bytes for item in items) / 2**20
    lines.append(f"  {len(items)} entries, {total:.1f} MiB" + (" freed" if pruned else ""))
    return "\n".join(lines)
