"""The guest's initramfs: pinned Debian packages, an init from a template, one cpio.

The package list is ``guest/rootfs/packages.toml``; exact versions and checksums
are in ``guest/rootfs/<debian-arch>.lock.json``. The build unpacks the locked
packages (private apt state: the host's dpkg is never touched), keeps only the
listed programs plus the shared libraries they load (followed through their ELF
headers), adds ``/init``, ``/etc/inittab``, an account file and the bench's SSH
public key, and writes a deterministic cpio, uncompressed: with Linux perf and its
libraries (32 MB) the guest kernel took 3-6 s under TCG to inflate the gzipped
image before every boot, against about 1 s to unpack the plain one::

    entry = build_rootfs(arches.get("arm64"), Cache.default(), ensure_keypair(...))
    entry.path / ROOTFS_FILE          # rootfs.cpio
    entry.manifest["packages"]        # what went in, with versions and SHA-256

If Debian no longer serves a locked version (a point release replaced it), the
build warns, uses the current one and records it; ``strict_lock=True`` (or
``$PROFBENCH_STRICT_LOCK=1``) makes that an error, and `relock` rewrites the lock.

Each stage of a build logs the fraction done and the time left, measured against
the previous build of the arch (its manifest's ``build_s``), else an estimate.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.arches import ArchProfile
from harness.builder import cpio
from harness.builder.cache import Cache, CacheEntry, content_key, file_sha256, list_entries
from harness.builder.debs import PinnedPackage, PrivateApt, elf_needs, extract
from harness.builder.keys import KeyPair
from harness.errors import BuildError, ConfigError
from harness.paths import GUEST_DIR
from harness.progress import Progress, format_progress
from harness.templates import render, template_source

LOG = logging.getLogger(__name__)

ROOTFS_RECIPE = 2  # bump when the assembly below changes what lands in the image (2: no gzip)
ROOTFS_FILE = "rootfs.cpio"
PLAN_FILE = GUEST_DIR / "rootfs" / "packages.toml"
TEMPLATES = ("rootfs/init.j2", "rootfs/inittab.j2")
STRICT_ENV = "PROFBENCH_STRICT_LOCK"
#: Seconds of a rootfs build when none was timed before: 11 s here (2 cores, a fast
#: mirror); the network decides most of it.
TYPICAL_ROOTFS_S = 15.0
BUILD_STAGES = 5


@dataclass(frozen=True, slots=True)
class InitConfig:
    """What the init script and inittab are rendered from."""

    marker: str  # prefix of every line init prints on the console
    ready: str  # printed once the SSH server has been started
    hostname: str
    interface: str
    address: str  # CIDR
    gateway: str
    ssh_port: int


#: QEMU user-mode networking's fixed guest address and gateway.
GUEST_INIT = InitConfig(
    marker="profbench-guest:",
    ready="ready",
    hostname="profbench",
    interface="eth0",
    address="10.0.2.15/24",
    gateway="10.0.2.2",
    ssh_port=22,
)


@dataclass(frozen=True, slots=True)
class PackagePlan:
    """The parsed ``packages.toml``."""

    packages: tuple[str, ...]
    programs: tuple[tuple[str, str], ...]  # (path in packages, path in guest)
    links: tuple[tuple[str, str], ...]  # (path in guest, target)


def load_plan(path: Path = PLAN_FILE) -> PackagePlan:
    """Read and check the package list.

    :raise ConfigError: unknown sections or non-string values.
    """
    data = tomllib.loads(path.read_text())
    unknown = set(data) - {"packages", "programs", "links"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    tables = [data.get(name, {}) for name in ("packages", "programs", "links")]
    for table in tables:
        if not all(isinstance(v, str) for v in table.values()):
            raise ConfigError(f"{path}: every value must be a string")
    return PackagePlan(
        packages=tuple(sorted(tables[0])),
        programs=tuple(sorted(tables[1].items())),
        links=tuple(sorted(tables[2].items())),
    )


def lock_path(arch: ArchProfile) -> Path:
    """Where the lock for ``arch``'s packages lives."""
    return GUEST_DIR / "rootfs" / f"{arch.debian_arch}.lock.json"


def read_lock(arch: ArchProfile) -> tuple[PinnedPackage, ...]:
    """The pinned packages for ``arch``.

    :raise ConfigError: no lock yet (with the command that makes one).
    """
    path = lock_path(arch)
    if not path.is_file():
        raise ConfigError(
            f"no package lock {path}; create it with: invoke rootfs --arch {arch.name} --relock"
        )
    return tuple(PinnedPackage(**entry) for entry in json.loads(path.read_text())["packages"])


def relock(arch: ArchProfile, cache: Cache) -> tuple[PinnedPackage, ...]:
    """Pin every planned package at today's candidate version and write the lock."""
    apt = PrivateApt(cache.root / "apt" / arch.debian_arch, debian_arch=arch.debian_arch)
    apt.update()
    pins = tuple(apt.candidates(load_plan().packages))
    data = {"debian_arch": arch.debian_arch, "packages": [asdict(p) for p in pins]}
    lock_path(arch).write_text(json.dumps(data, indent=2) + "\n")
    return pins


def rootfs_key(arch: ArchProfile, keypair: KeyPair) -> str:
    """Cache key: everything that decides the image's bytes, none of it from the network."""
    return content_key(
        {
            "recipe": ROOTFS_RECIPE,
            "arch": arch.debian_arch,
            "plan": PLAN_FILE.read_text(),
            "lock": [asdict(p) for p in read_lock(arch)],
            "templates": {name: template_source(name) for name in TEMPLATES},
            "init": asdict(GUEST_INIT),
            "pubkey": keypair.public_line,
        }
    )


def build_rootfs(
    arch: ArchProfile, cache: Cache, keypair: KeyPair, *, strict_lock: bool | None = None
) -> CacheEntry:
    """Return the cached initramfs for ``arch``, building it if needed (network, ~10 s)."""
    strict = os.environ.get(STRICT_ENV) == "1" if strict_lock is None else strict_lock
    entry = cache.entry("rootfs", rootfs_key(arch, keypair))
    if entry.is_complete:
        return entry
    LOG.info("building the %s rootfs into %s", arch.name, entry.path)
    return cache.obtain(entry, lambda path: _build(arch, cache, keypair, path, strict=strict))


def expected_build_s(arch: str, past: Iterable[Mapping[str, Any]]) -> tuple[float, str]:
    """How long a rootfs build for ``arch`` should take, and on what grounds.

    ``past`` are manifests of finished rootfs builds; the newest timed one of the
    same arch counts, else `TYPICAL_ROOTFS_S`, called an estimate.
    """
    timed = [m for m in past if m.get("arch") == arch and m.get("build_s")]
    if timed:
        newest = max(timed, key=lambda m: float(m.get("built_at") or 0.0))
        return float(newest["build_s"]), f"time of the previous {arch} rootfs build"
    return TYPICAL_ROOTFS_S, "estimate: a typical rootfs build's time"


class _Stages:
    """Logs each stage of a build as it starts: its name, the fraction done, the time left."""

    def __init__(self, what: str, expected: tuple[float, str]) -> None:
        self._what = what
        self._expected_s, self._basis = expected
        self._started: float | None = None  # at the first stage: not while waiting on a lock
        self._done = 0

    @property
    def elapsed_s(self) -> float:
        """Seconds since the first stage started."""
        return 0.0 if self._started is None else time.monotonic() - self._started

    def start(self, name: str) -> None:
        """Log that stage ``name`` begins (the previous one is done)."""
        if self._started is None:
            self._started = time.monotonic()
        progress = Progress(self._done, BUILD_STAGES, self.elapsed_s, basis=self._basis,
                            unit="stages", expected_s=self._expected_s)  # fmt: skip
        LOG.info("%s: %s; %s", self._what, name, format_progress(progress))
        self._done += 1


def _build(
    arch: ArchProfile, cache: Cache, keypair: KeyPair, out: Path, *, strict: bool
) -> dict[str, object]:
    past = [e.manifest for e in list_entries(cache) if e.kind == "rootfs" and e.is_complete]
    stages = _Stages(f"{arch.name} rootfs", expected_build_s(arch.name, past))
    apt = PrivateApt(cache.root / "apt" / arch.debian_arch, debian_arch=arch.debian_arch)
    stages.start("refreshing the package lists")
    apt.update()
    locked = read_lock(arch)
    stages.start(f"checking {len(locked)} locked versions")
    pins, drift = _current_pins(apt, locked, strict=strict)
    stages.start(f"downloading {len(pins)} packages")
    debs = apt.download(pins, into=cache.root / "apt" / arch.debian_arch / "debs")
    tree = out / "tree"
    stages.start(f"unpacking {len(debs)} packages")
    extract(debs, root=tree)
    stages.start("collecting programs and libraries, writing the cpio")
    plan = load_plan()
    files = collect_files(tree, [src for src, _ in plan.programs], elf_needs)
    renames = dict(plan.programs)
    members = assemble_members(
        {renames.get(path, path): data for path, data in files.items()},
        links=plan.links,
        keypair=keypair,
        programs=set(renames.values()),
    )
    blob = cpio.write_newc(members)
    shutil.rmtree(tree)
    image = out / ROOTFS_FILE
    image.write_bytes(blob)
    LOG.info("rootfs: %d entries, %.1f MiB", len(members), len(blob) / 2**20)
    return {
        "arch": arch.name,
        "packages": [asdict(p) for p in pins],
        "lock_drift": drift,
        "files": len(members),
        "sha256": file_sha256(image),
        "size_bytes": len(blob),
        "build_s": round(stages.elapsed_s, 1),  # the next build's expected time
    }


def _current_pins(
    apt: PrivateApt, locked: Iterable[PinnedPackage], *, strict: bool
) -> tuple[list[PinnedPackage], list[str]]:
    pins, drift = [], []
    for pin in locked:
        if apt.has_version(pin.name, pin.version):
            pins.append(pin)
            continue
        now = apt.show(pin.name)
        drift.append(f"{pin.name}: locked {pin.version}, Debian now serves {now.version}")
        pins.append(now)
    if drift and strict:
        raise BuildError(
            "locked package versions are no longer served: "
            + "; ".join(drift)
            + "\n  fix: invoke rootfs --relock (and commit the lock), or unset "
            + STRICT_ENV
        )
    # A point release of Debian 12 replaces a locked version (linux-perf 6.1.192-2 by
    # -3) on every fresh machine until the lock is renewed: nothing a newcomer can act
    # on, so it is recorded (the manifest's ``lock_drift``, run.json's and every
    # bundle's ``rootfs_lock_drift``), not warned about. A version that cannot be had
    # at all still fails, in `PrivateApt.download`, with its fix.
    for line in drift:
        LOG.info("package lock: %s; using it, recorded in the rootfs manifest", line)
    return pins, drift


# --- pure assembly ------------------------------------------------------------------------

ElfReader = Callable[[Path], tuple[str | None, tuple[str, ...]]]


def collect_files(tree: Path, programs: Iterable[str], read_elf: ElfReader) -> dict[str, bytes]:
    """Programs plus every library they load, transitively: guest path → bytes.

    Libraries are looked up in the tree's library directories; links are followed
    inside the tree (never out to the host) and stored as plain files.

    :raise BuildError: a program is missing or a library cannot be found.
    """
    lib_dirs = _library_dirs(tree)
    files: dict[str, bytes] = {}
    pending = list(programs)
    while pending:
        rel = pending.pop()
        if rel in files:
            continue
        real = resolve_in_tree(tree, rel)
        if real is None:
            raise BuildError(f"{rel} is not in the unpacked packages; check packages.toml")
        files[rel] = real.read_bytes()
        if not files[rel].startswith(b"\x7fELF"):
            continue
        interp, needed = read_elf(real)
        if interp:
            pending.append(interp.lstrip("/"))
        for soname in needed:
            found = next(
                (f"{d}/{soname}" for d in lib_dirs if resolve_in_tree(tree, f"{d}/{soname}")), None
            )
            if found is None:
                raise BuildError(
                    f"{rel} needs {soname}, which no listed package provides; "
                    "add its package to guest/rootfs/packages.toml"
                )
            pending.append(found)
    return files


def _library_dirs(tree: Path) -> list[str]:
    multiarch = sorted(str(p.relative_to(tree)) for p in tree.glob("*lib*/*-linux-gnu*"))
    multiarch += sorted(str(p.relative_to(tree)) for p in tree.glob("usr/lib/*-linux-gnu*"))
    return [*multiarch, "lib", "usr/lib", "lib64"]


def resolve_in_tree(tree: Path, rel: str, *, hops: int = 40) -> Path | None:
    """Resolve ``rel`` as if ``tree`` were ``/`` (a chroot): None when it is not a file.

    Links are followed at every component, absolute targets restart at ``tree`` and
    ``..`` never climbs above it, so nothing on the host is ever read.
    """
    pending = list(PurePosixPath(rel).parts)
    done: list[str] = []
    followed = 0
    while pending:
        part = pending.pop(0)
        if part in ("", ".", "/"):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = tree.joinpath(*done, part)
        if candidate.is_symlink():
            followed += 1
            if followed > hops:
                return None
            target = PurePosixPath(os.readlink(candidate))
            if target.is_absolute():
                done = []
            pending = [*target.parts, *pending]
            continue
        done.append(part)
    path = tree.joinpath(*done)
    return path if path.is_file() else None


def assemble_members(
    files: Mapping[str, bytes],
    *,
    links: Iterable[tuple[str, str]],
    keypair: KeyPair,
    programs: set[str],
) -> list[cpio.CpioMember]:
    """Every cpio member of the image: directories, files, links, config, /init."""
    context = {"init": GUEST_INIT}
    extra_files = {
        "init": (render("rootfs/init.j2", context).encode(), 0o755),
        "etc/inittab": (render("rootfs/inittab.j2", context).encode(), 0o644),
        "etc/passwd": (b"root:x:0:0:root:/root:/bin/sh\n", 0o644),
        "etc/group": (b"root:x:0:\ntty:x:5:\n", 0o644),
        "etc/shells": (b"/bin/sh\n", 0o644),
        "root/.ssh/authorized_keys": (keypair.public_line.encode() + b"\n", 0o600),
    }
    members = [cpio.char_device("dev/console", 5, 1), cpio.char_device("dev/null", 1, 3, 0o666)]
    paths: set[str] = set()
    for rel, data in files.items():
        mode = 0o755 if rel in programs or ".so" in rel else 0o644
        members.append(cpio.file(rel, data, mode))
        paths.add(rel)
    for rel, (data, mode) in extra_files.items():
        members.append(cpio.file(rel, data, mode))
        paths.add(rel)
    for rel, target in links:
        members.append(cpio.symlink(rel, target))
        paths.add(rel)
    dirs = {"dev", "proc", "sys", "tmp", "run", "root", "etc/dropbear", "mnt"}
    for rel in paths | dirs:
        parent = PurePosixPath(rel).parent
        while str(parent) != ".":
            dirs.add(str(parent))
            parent = parent.parent
    private = {"root", "root/.ssh", "etc/dropbear"}
    members += [cpio.directory(d, 0o700 if d in private else 0o755) for d in sorted(dirs)]
    return members
