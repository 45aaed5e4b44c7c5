"""Snapshot decisions (pure): restore argv, URIs, cache key, staleness, migration states."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from harness import arches
from harness.builder.images import BootFiles, GuestImages
from harness.vm.argv import (
    MachineSpec,
    build_argv,
    parse_usernet_connections,
    with_incoming,
)
from harness.vm.snapshot import (
    SNAPSHOT_FORMAT,
    MigrationState,
    StateFileFacts,
    load_uri,
    migration_state,
    save_uri,
    snapshot_key,
    stale_reason,
)
from harness.vm.topology import default_topology
from tests.unit.golden import LOGS_DIR

ARM64 = arches.get("arm64")
SPEC = MachineSpec(arch=ARM64, topology=default_topology(8))
IMAGES = GuestImages(
    arch=ARM64, variant="default",
    files=BootFiles(Path("/c/kernel/k1/Image"), Path("/c/rootfs/r1/rootfs.cpio")),
    kernel_build=Path("/c/kernel/k1/build"), ssh_key=Path("/c/ssh/id"), kernel_key="k1",
    kernel_release="6.1.192", kernel_sha256="a" * 64, config_sha256="b" * 64,
    rootfs_key="r1", rootfs_sha256="c" * 64,
)  # fmt: skip
QEMU = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"


def test_restore_argv_is_the_boot_argv_plus_incoming_defer() -> None:
    boot = build_argv(SPEC, IMAGES.files, qmp_fd=5, console_log=Path("/w/console.log"))
    restore = with_incoming(boot)
    assert restore[: len(boot)] == boot
    assert restore[len(boot) :] == ("-incoming", "defer")


@pytest.mark.parametrize("name", ["state.mig", "a dir/it's; rm -rf x/state.mig"])
def test_migration_uris_pass_any_path_to_sh_as_one_word(name: str) -> None:
    path = Path("/cache") / name
    save, load = save_uri(path), load_uri(path)
    assert save.startswith("exec:")
    assert load.startswith("exec:")
    assert shlex.split(save[len("exec:") :]) == ["cat", ">", str(path)]
    assert shlex.split(load[len("exec:") :]) == ["cat", str(path)]


def test_the_key_follows_what_shapes_the_saved_state() -> None:
    key = snapshot_key(SPEC, IMAGES, QEMU)
    assert snapshot_key(SPEC, IMAGES, QEMU) == key
    changed = {
        "cpus": (dataclasses.replace(SPEC, topology=default_topology(4)), IMAGES, QEMU),
        "kernel args": (dataclasses.replace(SPEC, kernel_args=("nokaslr",)), IMAGES, QEMU),
        "nmi": (dataclasses.replace(SPEC, nmi=False), IMAGES, QEMU),
        "memory": (dataclasses.replace(SPEC, memory_mib=2048), IMAGES, QEMU),
        "icount": (dataclasses.replace(SPEC, icount_shift=0), IMAGES, QEMU),
        "kernel": (SPEC, dataclasses.replace(IMAGES, kernel_sha256="d" * 64), QEMU),
        "rootfs": (SPEC, dataclasses.replace(IMAGES, rootfs_sha256="e" * 64), QEMU),
        "qemu": (SPEC, IMAGES, QEMU.replace("7.2.22", "8.0.0")),
    }
    keys = {what: snapshot_key(*parts) for what, parts in changed.items()}
    assert key not in keys.values()
    assert len(set(keys.values())) == len(keys), keys


SAVED = {"format": SNAPSHOT_FORMAT, "state_bytes": 1000, "state_sha256": "f" * 64}


@pytest.mark.parametrize(
    ("manifest", "found", "reason"),
    [
        (SAVED, StateFileFacts(1000, "f" * 64), None),
        (SAVED, None, "missing"),
        (SAVED, StateFileFacts(999, "f" * 64), "999 bytes, 1000 were saved"),
        (SAVED, StateFileFacts(1000, "0" * 64), "sha256 is 000000000000"),
        ({**SAVED, "format": SNAPSHOT_FORMAT - 1}, StateFileFacts(1000, "f" * 64), "format"),
        ({}, StateFileFacts(1000, "f" * 64), "format"),
    ],
    ids=["usable", "missing", "short", "other-bytes", "old-format", "no-manifest-facts"],
)
def test_stale_snapshots_are_named_with_the_reason(
    manifest: dict[str, object], found: StateFileFacts | None, reason: str | None
) -> None:
    said = stale_reason(manifest, found)
    if reason is None:
        assert said is None
    else:
        assert said is not None
        assert reason in said


@pytest.mark.parametrize(
    ("reply", "state"),
    [
        ({}, MigrationState.PENDING),  # the destination before the stream starts
        ({"status": "setup"}, MigrationState.PENDING),
        ({"status": "active"}, MigrationState.PENDING),
        ({"status": "device"}, MigrationState.PENDING),
        ({"status": "cancelling"}, MigrationState.PENDING),
        ({"status": "completed"}, MigrationState.DONE),
        ({"status": "failed", "error-desc": "load of migration failed"}, MigrationState.FAILED),
        ({"status": "cancelled"}, MigrationState.FAILED),
    ],
)
def test_query_migrate_replies_map_to_states(reply: dict[str, str], state: MigrationState) -> None:
    assert migration_state(reply) is state


def test_an_open_ssh_connection_is_seen_and_a_closed_one_is_not() -> None:
    def recorded(name: str) -> str:
        return (LOGS_DIR / name).read_bytes().decode()

    assert parse_usernet_connections(recorded("info-usernet.txt")) == (
        "ESTABLISHED 127.0.0.1:10022",
    )
    assert parse_usernet_connections(recorded("info-usernet-ssh-open.txt")) == (
        "ESTABLISHED 127.0.0.1:35305",
    )
    assert parse_usernet_connections(recorded("info-usernet-ssh-time-wait.txt")) == ()
