"""The build cache as ``invoke cache`` shows it: entries, sizes, current or stale.

It lives above the build and the agent because "current" means "what today's tree
would build", and that includes the agent's default build::

    items = survey_cache(Cache.default())
    print(format_listing(items, cache.root, pruned=False))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.agent.module.build import agent_key
from harness.agent.module.spec import AgentSpec
from harness.agent.profctl_build import profctl_key
from harness.arches import ARCHES
from harness.builder.cache import Cache, CacheEntry, entry_size_bytes, list_entries, remove_entry
from harness.builder.kernel import VARIANTS, KernelChoice, KernelRequest, kernel_key, source_key
from harness.builder.kernels import VERSIONS
from harness.builder.keys import ensure_keypair
from harness.builder.rootfs import rootfs_key
from harness.process import tool_version


@dataclass(frozen=True, slots=True)
class CacheListing:
    """One cache entry as ``invoke cache`` shows it."""

    entry: CacheEntry
    size_bytes: int
    finished: bool
    current: bool  # what today's tree would build (else stale: left from older inputs)


def current_keys(cache: Cache) -> set[str]:
    """Keys the current tree builds: every arch, variant and kernel version, rootfs, sources.

    The agent counts with its default spec (other specs are cheap to rebuild).
    """
    keypair = ensure_keypair(cache.root / "ssh")
    keys = {source_key(version) for version in VERSIONS.values()}
    for arch in ARCHES.values():
        keys.add(rootfs_key(arch, keypair))
        kernels = [kernel_key(KernelRequest(arch=arch, variant=v, kernel=KernelChoice(k)))
                   for v in VARIANTS for k in VERSIONS]  # fmt: skip
        keys.update(kernels)
        keys.update(agent_key(AgentSpec(), kernel) for kernel in kernels)
        if profctl := profctl_key(arch):
            keys.add(profctl)
    return keys


def survey_cache(cache: Cache) -> list[CacheListing]:
    """Every cache entry with its size and whether the current tree still uses it."""
    current = current_keys(cache)
    return [
        CacheListing(e, entry_size_bytes(e), e.is_complete,
                     _snapshot_current(e, current) if e.kind == "snapshot"
                     else e.key in current or _tree_kernel_current(e))
        for e in list_entries(cache)
    ]  # fmt: skip


def _tree_kernel_current(entry: CacheEntry) -> bool:
    """Whether a --kernel-src kernel's tree still exists (then it stays).

    It was built from one state of that tree; an edit since makes a new entry, and
    hashing every tree here to tell which state is current would take seconds each.
    """
    if entry.kind != "kernel" or not entry.is_complete:
        return False
    tree = entry.manifest.get("tree")
    return bool(tree) and Path(str(tree)).is_dir()


def _snapshot_current(entry: CacheEntry, current: set[str]) -> bool:
    """A snapshot is current while the kernel and rootfs entries it booted are, on this QEMU.

    Its key covers the whole QEMU argv, which names those entries' directories.
    """
    if not entry.is_complete:
        return False
    manifest, root = entry.manifest, entry.path.parents[1]
    booted = {Path(arg).relative_to(root).parts[1] for arg in manifest.get("argv", ())
              if Path(arg).is_relative_to(root)}  # fmt: skip
    qemu = manifest.get("argv", [""])[0]
    return bool(booted) and booted <= current and manifest.get("qemu_version") == tool_version(qemu)


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
