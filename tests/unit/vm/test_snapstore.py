"""Snapshot entries in a real (temporary) cache; the cold boot and save are faked at one seam."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.builder.cache import Cache, file_sha256, remove_entry
from harness.builder.images import GuestImages
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.snapshot import FACTS_FILE, SNAPSHOT_FORMAT, STATE_FILE
from harness.vm.snapstore import SnapshotStore, _Saving
from tests.unit.vm.test_snapshot import IMAGES, SPEC


class SavingStore(SnapshotStore):
    """A store whose `_save` writes a stand-in stream instead of booting QEMU."""

    def __init__(self, cache: Cache) -> None:
        super().__init__(cache, Timeouts())
        self.saves = 0

    def _save(self, spec: MachineSpec, images: GuestImages, path: Path,
              saving: _Saving) -> dict[str, Any]:  # fmt: skip
        self.saves += 1
        state = path / STATE_FILE
        state.write_bytes(f"stream {self.saves}".encode() * 1000)
        (path / FACTS_FILE).write_text("### online\n0-7\n")
        return {"format": SNAPSHOT_FORMAT, "state_bytes": state.stat().st_size,
                "state_sha256": file_sha256(state)}  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> SavingStore:
    return SavingStore(Cache(tmp_path / "cache"))


def test_a_snapshot_is_saved_once_then_reused(store: SavingStore, tmp_path: Path) -> None:
    first, entry = store.obtain(SPEC, IMAGES, tmp_path / "save")
    again, _ = store.obtain(SPEC, IMAGES, tmp_path / "save")
    assert store.saves == 1
    assert again == first
    assert first.state_path == entry.path / STATE_FILE
    assert first.facts_text == "### online\n0-7\n"
    assert not list(entry.path.glob(".*")), "a temporary file was left in the entry"


@pytest.mark.parametrize("damage", ["bytes", "truncate", "delete"])
def test_a_damaged_state_file_is_saved_again_and_the_reason_kept(
    store: SavingStore, tmp_path: Path, damage: str
) -> None:
    _, entry = store.obtain(SPEC, IMAGES, tmp_path / "save")
    state = entry.path / STATE_FILE
    if damage == "bytes":
        state.write_bytes(state.read_bytes().replace(b"stream 1", b"stream X"))
    elif damage == "truncate":
        state.write_bytes(state.read_bytes()[:100])
    else:
        state.unlink()
    snapshot, _ = store.obtain(SPEC, IMAGES, tmp_path / "save")
    assert store.saves == 2
    assert snapshot.state_path.read_bytes().startswith(b"stream 2")
    assert len(store.rebuilds) == 1


def test_a_fresh_process_does_not_trust_a_file_another_verified(
    store: SavingStore, tmp_path: Path
) -> None:
    _, entry = store.obtain(SPEC, IMAGES, tmp_path / "save")
    state = entry.path / STATE_FILE
    stat = state.stat()
    state.write_bytes(state.read_bytes().replace(b"stream 1", b"stream X"))
    later = SavingStore(store._cache)
    later.obtain(SPEC, IMAGES, tmp_path / "save")
    assert later.saves == 1, f"size {stat.st_size} unchanged, yet the bytes were not re-checked"


def test_removing_a_judged_build_spares_a_newer_one(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    entry = cache.obtain(cache.entry("snapshot", "k"), lambda path: {})
    judged = entry.manifest["built_at"]
    assert remove_entry(entry, built_at=judged)
    rebuilt = cache.obtain(entry, lambda path: {})
    assert not remove_entry(rebuilt, built_at=judged)  # someone else's rebuild: kept
    assert rebuilt.is_complete
    assert json.loads(rebuilt.manifest_path.read_text())["built_at"] != judged


def test_two_workers_asking_at_once_save_one_snapshot(tmp_path: Path) -> None:
    """The entry's lock serialises them; the second reads what the first finished."""
    cache = Cache(tmp_path / "cache")
    started = threading.Barrier(2)

    stores = [SavingStore(cache), SavingStore(cache)]
    found: list[bytes] = []

    def ask(store: SavingStore) -> None:
        started.wait()
        snapshot, _ = store.obtain(SPEC, IMAGES, tmp_path / "save")
        found.append(snapshot.state_path.read_bytes())

    workers = [threading.Thread(target=ask, args=(store,)) for store in stores]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=20)
    assert sum(store.saves for store in stores) == 1
    assert len(found) == 2
    assert found[0] == found[1]
