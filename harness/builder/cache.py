"""A content-addressed build cache outside the checkout.

An entry is a directory ``<root>/<kind>/<key>/`` where ``key`` is a hash of
everything that determines the output (source version, fragments, toolchain,
arch, variant...). Builds happen *in place*, because a kernel build tree must
keep its absolute path for out-of-tree modules, and an entry counts as finished
only once its ``manifest.json`` exists: it is written last, atomically. A build
that fails or is interrupted removes its directory; one that was killed outright
leaves a directory without a manifest, which the next build discards::

    cache = Cache.default()
    entry = cache.entry("rootfs", content_key({"arch": "arm64", "lock": lock_text}))
    entry = cache.obtain(entry, build=lambda path: {"files": write_rootfs(path)})
    entry.manifest["files"]

The root is ``$PROFBENCH_CACHE``, else ``$XDG_CACHE_HOME/profbench``, else
``~/.cache/profbench``. Concurrent builders (xdist workers, two terminals)
serialise on a per-entry ``flock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessTimeout

LOG = logging.getLogger(__name__)

CACHE_ENV = "PROFBENCH_CACHE"
MANIFEST = "manifest.json"


def content_key(parts: Mapping[str, object]) -> str:
    """Hash ``parts`` (JSON-serialisable) into a short, stable cache key."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON so that readers see either nothing or the whole file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One cache directory; complete only when its manifest exists."""

    kind: str
    key: str
    path: Path

    @property
    def manifest_path(self) -> Path:
        """Where the completion manifest lives."""
        return self.path / MANIFEST

    @property
    def is_complete(self) -> bool:
        """Whether a build finished here."""
        return self.manifest_path.is_file()

    @property
    def manifest(self) -> dict[str, Any]:
        """The facts the builder recorded, plus ``key``, ``kind`` and ``built_at``."""
        data: dict[str, Any] = json.loads(self.manifest_path.read_text())
        return data


@dataclass(frozen=True, slots=True)
class Cache:
    """The cache root; hands out entries and builds them once."""

    root: Path

    @classmethod
    def default(cls) -> Cache:
        """The cache at ``$PROFBENCH_CACHE`` or the user's cache directory."""
        if env := os.environ.get(CACHE_ENV):
            return cls(Path(env).expanduser().resolve())
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return cls(Path(base) / "profbench")

    def entry(self, kind: str, key: str) -> CacheEntry:
        """The entry for ``kind``/``key``, finished or not."""
        return CacheEntry(kind, key, self.root / kind / key)

    def obtain(
        self,
        entry: CacheEntry,
        build: Callable[[Path], Mapping[str, Any]],
        *,
        lock_timeout_s: float = 3600.0,
    ) -> CacheEntry:
        """Return ``entry`` finished, running ``build(entry.path)`` first if needed.

        ``build`` fills the directory and returns facts for the manifest. Blocks
        while another process builds the same entry, at most ``lock_timeout_s``.

        :raise HarnessTimeout: another builder held the entry too long.
        """
        if entry.is_complete:
            return entry
        entry.path.parent.mkdir(parents=True, exist_ok=True)
        with _exclusive(entry.path.with_name(f"{entry.key}.lock"), lock_timeout_s, entry.key):
            if entry.is_complete:  # another process finished it while we waited
                return entry
            if entry.path.exists():
                LOG.warning("discarding unfinished %s build at %s", entry.kind, entry.path)
                shutil.rmtree(entry.path)
            entry.path.mkdir()
            try:
                facts = dict(build(entry.path))
            except BaseException:
                shutil.rmtree(entry.path, ignore_errors=True)  # nothing half-built survives
                raise
            facts.update(kind=entry.kind, key=entry.key, built_at=time.time())
            write_json_atomic(entry.manifest_path, facts)
        return entry


@contextlib.contextmanager
def holding(entry: CacheEntry, *, timeout_s: float = 600.0) -> Iterator[None]:
    """Hold ``entry``'s build lock (as `Cache.obtain` does) while amending a finished entry.

    :raise HarnessTimeout: another process held it longer than ``timeout_s``.
    """
    with _exclusive(entry.path.with_name(f"{entry.key}.lock"), timeout_s, entry.key):
        yield


def list_entries(cache: Cache) -> list[CacheEntry]:
    """Every entry directory in the cache, finished or not, by kind then key."""
    kinds = ("source", "kernel", "rootfs", "agent", "profctl", "snapshot", "functions")
    return [
        cache.entry(kind, path.name)
        for kind in kinds
        for path in sorted((cache.root / kind).glob("*"))
        if path.is_dir()
    ]


def entry_size_bytes(entry: CacheEntry) -> int:
    """Bytes under an entry (links not followed)."""
    return sum(p.lstat().st_size for p in entry.path.rglob("*"))


def remove_entry(entry: CacheEntry, *, built_at: float | None = None) -> bool:
    """Delete an entry and its lock file, holding the lock so no build is cut short.

    With ``built_at``, only the build finished at that time is deleted: an entry
    another process rebuilt meanwhile stays. Returns whether it was deleted.
    """
    lock = entry.path.with_name(f"{entry.key}.lock")
    with _exclusive(lock, 60.0, entry.key):
        if built_at is not None and (
            not entry.is_complete or entry.manifest.get("built_at") != built_at
        ):
            return False
        shutil.rmtree(entry.path, ignore_errors=True)
    if built_at is None:
        lock.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def _exclusive(lock_path: Path, timeout_s: float, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path``, waiting at most ``timeout_s``."""
    with lock_path.open("a") as handle:
        deadline = time.monotonic() + timeout_s
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not announced:
                    LOG.info("waiting for another process building %s", what)
                    announced = True
                if time.monotonic() > deadline:
                    raise HarnessTimeout(f"the build lock {lock_path}", timeout_s) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
