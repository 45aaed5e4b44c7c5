"""A developer's own kernel tree (``--kernel-src DIR``): its identity and its fitness.

The cache key of a tree's kernel is its *content*, so an edit rebuilds and nothing
else does. A git work tree is hashed through git's own index: a scratch copy of
the index is refreshed against the work tree (``git add -A``, which re-reads only
files whose stat data changed) and written as a tree object, whose id covers every
tracked and untracked-but-not-ignored file, dirty or not. Any other tree is walked
and every file hashed; a per-tree stat cache in the build cache
keeps a second walk from re-reading unchanged files (size, mtime, ctime, inode
and mode all equal)::

    identity = tree_identity(Path("~/linux").expanduser(), cache)
    identity.content        # 'git-tree:4b825d...' or 'walk:9f2c...'
    identity.commit         # HEAD's id, or None outside git
    release = tree_release(tree)                   # (6, 12)
    problems = missing_options(tree, merged.options)   # refuse before building

The build itself is `harness.builder.kernel.build_tree`, the same as Debian's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.builder.cache import Cache, write_json_atomic
from harness.errors import ConfigError

LOG = logging.getLogger(__name__)

_MAKE_VAR = re.compile(r"^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=\s*(\S*)\s*$", re.M)
_SYMBOL = re.compile(r"^\s*(?:menu)?config\s+([A-Za-z0-9_]+)\s*$", re.M)
#: Options the bench cannot do without, and what each gives it (named when a tree lacks one).
NEEDED = {
    "CONFIG_ARM64_PSEUDO_NMI": "pseudo-NMI (PMU overflows as NMIs)",
    "CONFIG_ARM_PMU": "the Arm PMU framework",
    "CONFIG_ARM_PMUV3": "the arm64 PMUv3 driver (drivers/perf/arm_pmuv3.c)",
    "CONFIG_HW_PERF_EVENTS": "hardware perf events (the PMU driver on 6.1)",
    "CONFIG_PERF_EVENTS": "perf events",
    "CONFIG_MODULES": "loadable modules (the agent)",
}
#: What in-tree build output looks like; ``make O=`` refuses such a tree.
_BUILT_MARKERS = (".config", "include/config", "include/generated")


@dataclass(frozen=True, slots=True)
class TreeIdentity:
    """What a tree is: its content hash, and its git commit when it has one."""

    path: Path
    content: str  # "git-tree:<id>" or "walk:<sha256>"
    commit: str | None
    dirty: bool  # differs from its commit (always False outside git)
    hash_s: float  # how long hashing took


def tree_release(tree: Path) -> tuple[int, int]:
    """(VERSION, PATCHLEVEL) from the tree's top Makefile.

    :raise ConfigError: the Makefile names no version.
    """
    found = dict(_MAKE_VAR.findall((tree / "Makefile").read_text(errors="replace")[:4096]))
    if not found.get("VERSION", "").isdigit() or not found.get("PATCHLEVEL", "").isdigit():
        raise ConfigError(f"{tree}/Makefile names no VERSION/PATCHLEVEL: not a kernel tree?")
    return int(found["VERSION"]), int(found["PATCHLEVEL"])


def tree_version_text(tree: Path) -> str:
    """``6.12.117`` (with EXTRAVERSION if any) from the top Makefile."""
    found = dict(_MAKE_VAR.findall((tree / "Makefile").read_text(errors="replace")[:4096]))
    version = ".".join(found[k] for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL") if found.get(k))
    return version + str(found.get("EXTRAVERSION", ""))


def check_buildable(tree: Path) -> None:
    """Refuse a tree that ``make O=`` would refuse, before anything runs.

    :raise ConfigError: the tree has in-tree build output (names it and the fix).
    """
    if built := [m for m in _BUILT_MARKERS if (tree / m).exists()]:
        raise ConfigError(
            f"--kernel-src {tree} holds in-tree build output ({', '.join(built)}); the bench "
            f"builds out of tree, which the kernel refuses then: run `make -C {tree} mrproper`"
        )


def kconfig_symbols(tree: Path, linux_arch: str) -> set[str]:
    """Every ``CONFIG_`` symbol the tree's Kconfig files define for ``ARCH=linux_arch``.

    Other architectures' Kconfig files are left out (their symbols do not exist
    for this build) when ``arch/<linux_arch>`` exists; where ARCH differs from the
    directory (x86_64 builds arch/x86) every arch counts, and ``olddefconfig``'s
    verification after it catches the rest. Reads about 1,700 files (about a second).
    """
    arch_dir = linux_arch if (tree / "arch" / linux_arch).is_dir() else None
    symbols: set[str] = set()
    for path in _kconfig_files(tree, arch_dir):
        symbols.update(
            f"CONFIG_{name}" for name in _SYMBOL.findall(path.read_text(errors="replace"))
        )
    return symbols


def missing_options(tree: Path, linux_arch: str, requested: Iterable[tuple[str, str]]) -> list[str]:
    """Each requested option the tree does not define, with why the bench needs it."""
    defined = kconfig_symbols(tree, linux_arch)
    problems = []
    for option, _ in requested:
        if option not in defined:
            why = f": {NEEDED[option]}, which the bench needs" if option in NEEDED else ""
            problems.append(f"{option} is not defined in {tree}'s Kconfig{why}")
    return problems


def tree_identity(tree: Path, cache: Cache) -> TreeIdentity:
    """The content identity of ``tree`` (git index when it is a git work tree, else a walk).

    Blocks while hashing: well under a second for an unchanged git tree; a cold walk
    reads every file (seconds for a kernel tree), a warm one only changed files.

    :raise ConfigError: git failed on what looks like a git tree.
    """
    started = time.monotonic()
    if (tree / ".git").exists():
        content, commit, dirty = _git_identity(tree)
    else:
        content, commit, dirty = f"walk:{_walk_digest(tree, cache)}", None, False
    elapsed = time.monotonic() - started
    LOG.info("hashed %s in %.2f s: %s%s", tree, elapsed, content, " (dirty)" if dirty else "")
    return TreeIdentity(tree, content, commit, dirty, elapsed)


def _kconfig_files(tree: Path, arch_dir: str | None) -> Iterator[Path]:
    for root, dirs, files in os.walk(tree):
        here = Path(root)
        if here == tree:
            dirs[:] = [d for d in dirs if d not in (".git", "Documentation", "tools", "samples")]
        elif here == tree / "arch" and arch_dir is not None:
            dirs[:] = [d for d in dirs if d == arch_dir]
        yield from (here / name for name in files if name.startswith("Kconfig"))


def _git(tree: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)} in {tree} failed: {proc.stderr.strip()[-400:]}")
    return proc.stdout.strip()


def _git_identity(tree: Path) -> tuple[str, str | None, bool]:
    """(content, commit, dirty) from a scratch copy of the tree's index."""
    index = Path(_git(tree, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    with tempfile.TemporaryDirectory(prefix="profbench-index-") as scratch:
        copy = Path(scratch) / "index"
        if index.is_file():
            shutil.copyfile(index, copy)
        env = {"GIT_INDEX_FILE": str(copy)}
        _git(tree, "add", "--all", "--", ".", env=env)
        content = _git(tree, "write-tree", env=env)
    try:
        commit = _git(tree, "rev-parse", "--verify", "HEAD")
    except ConfigError:  # a repository with no commit yet
        return f"git-tree:{content}", None, True
    return f"git-tree:{content}", commit, content != _git(tree, "rev-parse", "HEAD^{tree}")


def _walk_digest(tree: Path, cache: Cache) -> str:
    """SHA-256 over (path, mode, content hash) of every file; unchanged files from a stat cache."""
    store = cache.root / "treehash" / f"{hashlib.sha256(str(tree).encode()).hexdigest()[:24]}.json"
    known: dict[str, list[object]] = {}
    if store.is_file():
        known = json.loads(store.read_text())
    seen: dict[str, list[object]] = {}
    total = hashlib.sha256()
    for rel, stat in _files(tree):
        # ctime too: an edit that keeps the size and restores the mtime still moves it
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_mode]
        cached = known.get(rel)
        digest = str(cached[5]) if cached and cached[:5] == stamp else _file_digest(tree / rel)
        seen[rel] = [*stamp, digest]
        total.update(f"{rel}\0{stat.st_mode & 0o111:o}\0{digest}\n".encode())
    store.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(store, seen)
    return total.hexdigest()


def _files(tree: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file and symlink under ``tree``, sorted, ``.git`` left out."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(tree / rel_dir) as entries:
            items = sorted(entries, key=lambda e: e.name, reverse=True)
        for entry in items:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name != ".git":
                    stack.append(rel)
            else:
                yield rel, entry.stat(follow_symlinks=False)


def _file_digest(path: Path) -> str:
    if path.is_symlink():
        return hashlib.sha256(f"link:{os.readlink(path)}".encode()).hexdigest()
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
