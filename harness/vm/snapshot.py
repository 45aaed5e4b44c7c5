"""A booted guest saved to a file, and the decisions around it (pure: no I/O).

A snapshot is the migration stream of a booted, preflighted guest (no agent
loaded, no SSH connection open), written by ``migrate`` to ``exec:cat > FILE``
and loaded into a fresh QEMU started with the same argv plus ``-incoming defer``.
It is a cache entry keyed by everything that shapes the saved state: the QEMU
argv (machine, CPUs, memory, kernel and initramfs paths, kernel arguments), the
image identities and the QEMU version::

    key = snapshot_key(spec, images, qemu_version="QEMU emulator version 7.2.0")
    uri = save_uri(Path("state.mig"))        # "exec:cat > state.mig", quoted for sh
    migration_state({"status": "active"})    # MigrationState.PENDING
    stale_reason(manifest, StateFileFacts(size=..., sha256=...))   # None when usable

`harness.vm.migration` drives QMP with these; `harness.vm.snapstore` keeps the
entries and rebuilds a stale or unloadable one.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from harness.builder.cache import content_key
from harness.builder.images import BootFiles, GuestImages
from harness.vm.argv import MachineSpec, build_argv

#: Bump when what a snapshot holds or how it is restored changes.
SNAPSHOT_FORMAT = 1
STATE_FILE = "state.mig"
FACTS_FILE = "facts.txt"
#: Migration bandwidth while saving: the default caps the stream at 128 MiB/s.
MAX_BANDWIDTH_BYTES_S = 1 << 40

# Placeholders for the parts of the argv that differ per run but not per guest state.
_QMP_FD = 3
_CONSOLE = Path("console.log")


class MigrationState(Enum):
    """Where a save or load stands, as ``query-migrate`` tells it."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


_DONE = frozenset({"completed"})
_FAILED = frozenset({"failed", "cancelled"})


def migration_state(reply: Mapping[str, Any]) -> MigrationState:
    """Read one ``query-migrate`` reply.

    No status yet (the destination before the stream starts), ``setup``,
    ``active``, ``device`` and the like are pending; ``completed`` is done;
    ``failed`` and ``cancelled`` are failures.
    """
    status = reply.get("status")
    if status in _DONE:
        return MigrationState.DONE
    if status in _FAILED:
        return MigrationState.FAILED
    return MigrationState.PENDING


def migration_summary(reply: Mapping[str, Any]) -> str:
    """One line for evidence: the status and QEMU's error text, if any."""
    status = reply.get("status", "<no status>")
    error = reply.get("error-desc")
    return f"status {status}" + (f": {error}" if error else "")


def save_uri(path: Path) -> str:
    """Migration URI that writes the stream to ``path`` (run by ``/bin/sh -c``)."""
    return f"exec:cat > {shlex.quote(str(path))}"


def load_uri(path: Path) -> str:
    """Migration URI that reads the stream from ``path``."""
    return f"exec:cat {shlex.quote(str(path))}"


def key_parts(spec: MachineSpec, images: GuestImages, qemu_version: str) -> dict[str, object]:
    """Everything a snapshot's state depends on, JSON-ready.

    The argv is built with fixed placeholders for the QMP descriptor and the
    console path (they differ per run, not per guest state), so any change to how
    guests are started, the kernel arguments included, makes a new key.
    """
    argv = build_argv(spec, BootFiles(images.files.kernel, images.files.initrd),
                      qmp_fd=_QMP_FD, console_log=_CONSOLE)  # fmt: skip
    return {
        "format": SNAPSHOT_FORMAT,
        "argv": list(argv),
        "kernel_sha256": images.kernel_sha256,
        "rootfs_sha256": images.rootfs_sha256,
        "qemu_version": qemu_version,
    }


def snapshot_key(spec: MachineSpec, images: GuestImages, qemu_version: str) -> str:
    """The cache key of the snapshot for this guest."""
    return content_key(key_parts(spec, images, qemu_version))


@dataclass(frozen=True, slots=True)
class StateFileFacts:
    """What is on disk for a snapshot's state file (None when it is missing)."""

    size: int
    sha256: str


def stale_reason(manifest: Mapping[str, Any], found: StateFileFacts | None) -> str | None:
    """Why a finished snapshot entry cannot be trusted, or None when it can.

    :param manifest: the entry's manifest (what was saved).
    :param found: the state file as it is now.
    """
    if manifest.get("format") != SNAPSHOT_FORMAT:
        return f"snapshot format {manifest.get('format')!r}, this harness writes {SNAPSHOT_FORMAT}"
    if found is None:
        return "the state file is missing"
    if found.size != manifest.get("state_bytes"):
        return f"the state file has {found.size} bytes, {manifest.get('state_bytes')} were saved"
    if found.sha256 != manifest.get("state_sha256"):
        saved = str(manifest.get("state_sha256"))
        return f"the state file's sha256 is {found.sha256[:12]}…, {saved[:12]}… was saved"
    return None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A usable snapshot: where its state is and what the guest was at save time."""

    key: str
    state_path: Path
    facts_text: str  # `harness.vm.preflight.FACTS_COMMAND` output at save time
    state_bytes: int

    def record(self) -> dict[str, object]:
        """For run.json."""
        return {"key": self.key, "state": str(self.state_path), "state_bytes": self.state_bytes}


def clock_command(epoch_s: float) -> str:
    """Set the guest's wall clock, which lags by the save-to-restore gap after a load.

    The host's time is written directly (``date -s``): the guest's RTC would do as
    well (``hwclock -s``), but one less device in the path is one less surprise.
    """
    return f"date -s @{int(epoch_s)} >/dev/null"
