"""Snapshots in the build cache: saved once per guest identity, checked, rebuilt when bad.

`SnapshotStore.start` is how a caller gets a running guest from a snapshot; the
snapshot is saved first when there is none (a cold boot, then ``migrate`` to a
file), and rebuilt, with a WARNING saying why, when its file no longer matches
what was saved or QEMU cannot load it::

    store = SnapshotStore(Cache.default(), Timeouts.from_env())
    guest = store.start(spec, images, workdir, name="gw0-arm64-tcg-8c-nmi")
    try:
        guest.shell.run("nproc")
    finally:
        guest.__exit__(None, None, None)       # QEMU stopped by its PID

An entry (``<cache>/snapshot/<key>/``) holds ``state.mig`` (the migration stream),
``facts.txt`` (the preflight output at save time) and the manifest, written last:
the cache's per-entry lock and manifest-last rule mean no reader ever sees a
half-written state (the stream also goes to a temporary name first). A state
file is hashed the first time this process uses it and after any change of its
size or modification time; an unchanged file is not hashed again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.builder.cache import Cache, CacheEntry, file_sha256, remove_entry
from harness.builder.images import GuestImages
from harness.errors import SnapshotError
from harness.process import tool_version
from harness.timeouts import Timeouts, wait_until
from harness.vm.argv import MachineSpec, parse_usernet_connections
from harness.vm.guest import Guest
from harness.vm.machine import GuestVM
from harness.vm.migration import save_state
from harness.vm.snapshot import (
    FACTS_FILE,
    STATE_FILE,
    Snapshot,
    StateFileFacts,
    key_parts,
    snapshot_key,
    stale_reason,
)

LOG = logging.getLogger(__name__)
KIND = "snapshot"


class SnapshotStore:
    """The snapshots one process uses; remembers which state files it has verified."""

    def __init__(self, cache: Cache, timeouts: Timeouts) -> None:
        self._cache = cache
        self._timeouts = timeouts
        self._verified: dict[Path, tuple[int, int]] = {}  # state file -> (size, mtime_ns)
        #: Why snapshots were rebuilt in this process, in order (also logged as WARNINGs).
        self.rebuilds: list[str] = []

    def start(
        self, spec: MachineSpec, images: GuestImages, workdir: Path, *, name: str,
        timeouts: Timeouts | None = None,
    ) -> Guest:  # fmt: skip
        """A running guest restored from the snapshot for ``spec``; the caller stops it.

        Saves the snapshot first when missing (a cold boot, in ``workdir/save``); an
        unloadable one is rebuilt and the restore tried once more. ``timeouts``
        replaces the store's budgets for this guest (a debug kernel's, say).

        :raise SnapshotError: the rebuilt snapshot would not load either.
        :raise HarnessError: the cold boot or the restore failed otherwise (classified).
        """
        budget = timeouts or self._timeouts
        snapshot, entry = self.obtain(spec, images, workdir / "save", timeouts=budget)
        try:
            return _enter(Guest(spec, images, workdir, timeouts=budget, name=name,
                                snapshot=snapshot))  # fmt: skip
        except SnapshotError as exc:
            self._discard(entry, f"QEMU could not restore it: {exc.reason} ({exc.evidence[-300:]})")
        snapshot, _ = self.obtain(spec, images, workdir / "save", timeouts=budget)
        return _enter(Guest(spec, images, workdir / "retry", timeouts=budget, name=name,
                            snapshot=snapshot))  # fmt: skip

    def obtain(
        self, spec: MachineSpec, images: GuestImages, save_dir: Path, *,
        timeouts: Timeouts | None = None,
    ) -> tuple[Snapshot, CacheEntry]:  # fmt: skip
        """The verified snapshot for ``spec``, saved now (cold boot in ``save_dir``) if needed.

        Blocks while another process saves the same snapshot.
        """
        budget = timeouts or self._timeouts
        qemu = tool_version(spec.arch.qemu_binary)
        entry = self._cache.entry(KIND, snapshot_key(spec, images, qemu))
        for _ in range(2):  # a bad entry is discarded once and saved again
            if entry.is_complete and (reason := self._stale(entry)) is not None:
                self._discard(entry, reason)
            entry = self._cache.obtain(
                entry,
                lambda path: self._save(spec, images, path, _Saving(save_dir, budget)),
                lock_timeout_s=budget.boot_s * 2,
            )
            if (reason := self._stale(entry)) is None:
                return self._snapshot(entry), entry
        raise SnapshotError(f"the snapshot {entry.path} was saved again and is still unusable",
                            reason or "")  # fmt: skip

    def _stale(self, entry: CacheEntry) -> str | None:
        """Why ``entry`` cannot be used (hashing its state file unless verified unchanged)."""
        manifest = entry.manifest
        state = entry.path / STATE_FILE
        try:
            stat = state.stat()
        except FileNotFoundError:
            return stale_reason(manifest, None)
        if self._verified.get(state) == (stat.st_size, stat.st_mtime_ns):
            return None
        reason = stale_reason(manifest, StateFileFacts(stat.st_size, file_sha256(state)))
        if reason is None:
            self._verified[state] = (stat.st_size, stat.st_mtime_ns)
        return reason

    def _discard(self, entry: CacheEntry, reason: str) -> None:
        built_at = entry.manifest.get("built_at") if entry.is_complete else None
        LOG.warning("snapshot %s is not trusted (%s): saving it again", entry.key, reason)
        self.rebuilds.append(reason)
        self._verified.pop(entry.path / STATE_FILE, None)
        if built_at is not None:
            remove_entry(entry, built_at=built_at)

    def _save(self, spec: MachineSpec, images: GuestImages, path: Path,
              saving: _Saving) -> dict[str, Any]:  # fmt: skip
        """Cold-boot ``spec`` in ``saving.workdir``, save it into the entry at ``path``."""
        LOG.info("saving a snapshot of %s (cold boot first) into %s", spec.name, path)
        started = time.monotonic()
        partial = path / f".{STATE_FILE}.partial"
        budget = saving.timeouts
        with Guest(spec, images, saving.workdir, timeouts=budget,
                   name=f"save-{spec.name}") as guest:  # fmt: skip
            boot_s = guest.boot_s
            guest.shell.close()  # slirp keeps no TCP state: nothing may be open when saved
            _wait_for_no_connections(guest.vm, budget)
            migrated = save_state(guest.vm.qmp, partial, timeout_s=budget.qmp_s,
                                  abort=guest.vm.exit_error)  # fmt: skip
            guest.vm.shutdown()  # the guest is stopped for good; no final dmesg
            facts_text = guest.facts_text
        partial.replace(path / STATE_FILE)
        (path / FACTS_FILE).write_text(facts_text)
        state = path / STATE_FILE
        state_bytes = state.stat().st_size
        facts = {**key_parts(spec, images, tool_version(spec.arch.qemu_binary)),
                 "spec": spec.name, "state_bytes": state_bytes,
                 "state_sha256": file_sha256(state), "boot_s": round(boot_s, 3),
                 "save_s": round(time.monotonic() - started - boot_s, 3),
                 "migrate_total_ms": migrated.get("total-time")}  # fmt: skip
        LOG.info("snapshot of %s saved: %.1f MiB in %.2fs after a %.1fs boot", spec.name,
                 state_bytes / 2**20, facts["save_s"], boot_s)  # fmt: skip
        return facts

    def _snapshot(self, entry: CacheEntry) -> Snapshot:
        manifest = entry.manifest
        return Snapshot(key=entry.key, state_path=entry.path / STATE_FILE,
                        facts_text=(entry.path / FACTS_FILE).read_text(),
                        state_bytes=int(manifest["state_bytes"]))  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Saving:
    """Where and under which budgets a snapshot's cold boot runs."""

    workdir: Path
    timeouts: Timeouts


@contextlib.contextmanager
def running_guest(
    spec: MachineSpec,
    images: GuestImages,
    workdir: Path,
    *,
    timeouts: Timeouts,
    snapshots: SnapshotStore | None,
) -> Iterator[Guest]:
    """``with Guest(...)``, restored from a snapshot when ``snapshots`` is given.

    Leaving stops QEMU by its PID whatever happened, as `Guest` does.
    """
    if snapshots is None:
        with Guest(spec, images, workdir, timeouts=timeouts) as booted:
            yield booted
        return
    guest = snapshots.start(spec, images, workdir, name=spec.name, timeouts=timeouts)
    try:
        yield guest
    except BaseException as exc:
        guest.__exit__(type(exc), exc, exc.__traceback__)
        raise
    guest.__exit__(None, None, None)


def _enter(guest: Guest) -> Guest:
    """Enter ``guest`` (it stops its QEMU itself when entering fails)."""
    return guest.__enter__()


def _wait_for_no_connections(vm: GuestVM, timeouts: Timeouts) -> None:
    """Wait until slirp holds no open TCP connection (the SSH client has closed its own)."""

    def closed() -> bool | None:
        return True if not parse_usernet_connections(vm.qmp.hmp("info usernet")) else None

    wait_until(closed, timeout_s=timeouts.qmp_s, what="the SSH connection to close",
               interval_s=0.02, abort=vm.exit_error)  # fmt: skip
