"""The pool hands out a guest as it was at boot, or a fresh one: fake guests, no QEMU."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from harness import arches
from harness.builder.images import GuestImages
from harness.errors import GuestError, HarnessError, SnapshotError, TransportError
from harness.timeouts import Timeouts
from harness.vm import pool as pool_module
from harness.vm.argv import MachineSpec
from harness.vm.baseline import STATE_COMMAND, read_state, reset_script
from harness.vm.pool import GuestPool
from harness.vm.snapstore import SnapshotStore
from harness.vm.topology import CpuTopology
from tests.unit.vm.test_baseline import FakeGuestShell, Output

FOUR = CpuTopology(cores=4)


class FakeVm:
    def __init__(self) -> None:
        self.status: int | None = None
        self.console: list[str] = ["[    0.000000] Booting Linux"]

    def exitcode(self) -> int | None:
        return self.status

    def console_text(self) -> str:
        return "\n".join(self.console)

    def check_console(self, *, since_line: int = 0, what: str = "") -> None:
        if any("WARNING" in line for line in self.console[since_line:]):
            raise GuestError(f"a WARNING in {what}")


#: The pool's check of a guest of four CPUs booted as `FakeGuest` boots: one round trip.
CHECK = reset_script(read_state(FakeGuestShell(online=set(range(4)))))


class BrokenShell(FakeGuestShell):
    def run(self, command: str, *, timeout_s: float | None = None, check: bool = True) -> Output:
        raise TransportError("SSH failed: connection reset")


class FakeGuest:
    """Stands in for `harness.vm.guest.Guest`: boots at once, records being stopped."""

    booted: list[FakeGuest]

    def __init__(
        self, spec: MachineSpec, images: GuestImages, workdir: Path, *, timeouts: Timeouts,
        name: str,
    ) -> None:  # fmt: skip
        self.name = name
        self.shell = FakeGuestShell(online=set(range(spec.topology.cpus)))
        self.vm = FakeVm()
        self.stopped = False
        self.boot_s = 0.5

    def __enter__(self) -> FakeGuest:
        FakeGuest.booted.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped = True


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> GuestPool:
    FakeGuest.booted = []
    monkeypatch.setattr(pool_module, "Guest", FakeGuest)
    base = MachineSpec(arch=arches.get("arm64"), topology=CpuTopology())
    return GuestPool(base, cast(GuestImages, None), tmp_path, prefix="gw0", timeouts=Timeouts())


def get(pool: GuestPool) -> FakeGuest:
    guest = pool.get(FOUR)
    assert isinstance(guest, FakeGuest)
    return guest


def first(pool: GuestPool) -> FakeGuest:
    guest = get(pool)
    assert guest.shell.commands == [STATE_COMMAND]  # the baseline, read right after boot
    return guest


def test_a_clean_guest_is_reused_after_one_check(pool: GuestPool) -> None:
    guest = first(pool)
    assert get(pool) is guest
    assert (guest.shell.commands, FakeGuest.booted) == ([STATE_COMMAND, CHECK], [guest])


def test_a_guest_left_dirty_is_restored_and_reused(pool: GuestPool) -> None:
    guest = first(pool)
    guest.shell.online.discard(3)
    guest.shell.sysctls["/proc/sys/kernel/perf_cpu_time_max_percent"] = "0"
    guest.shell.modules.append("profagent")
    assert get(pool) is guest
    assert (guest.shell.online, guest.shell.modules) == ({0, 1, 2, 3}, [])
    assert guest.shell.sysctls["/proc/sys/kernel/perf_cpu_time_max_percent"] == "25"
    assert FakeGuest.booted == [guest]


def test_a_guest_that_cannot_be_restored_is_replaced(pool: GuestPool) -> None:
    guest = first(pool)
    guest.shell.stuck = frozenset({3})
    guest.shell.online.discard(3)
    fresh = get(pool)
    assert fresh is not guest
    assert (guest.stopped, fresh.shell.online, FakeGuest.booted) == (True, {0, 1, 2, 3},
                                                                    [guest, fresh])  # fmt: skip


def test_a_guest_whose_qemu_exited_is_replaced_without_ssh(pool: GuestPool) -> None:
    guest = first(pool)
    guest.vm.status = -9
    fresh = get(pool)
    assert (fresh is not guest, guest.stopped) == (True, True)
    assert guest.shell.commands == [STATE_COMMAND]  # no SSH attempt to a dead guest


def test_a_guest_that_does_not_answer_is_replaced(pool: GuestPool) -> None:
    guest = first(pool)
    broken = BrokenShell()
    guest.shell = broken
    fresh = get(pool)
    assert (fresh is not guest, guest.stopped) == (True, True)


def test_a_splat_while_restoring_replaces_the_guest(
    pool: GuestPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    guest = first(pool)
    guest.shell.online.discard(2)
    run = guest.shell.run

    def splat_on_restore(command: str, **kwargs: float | bool | None) -> Output:
        if command != STATE_COMMAND:
            guest.vm.console.append("[   42.000000] WARNING: CPU: 2 PID: 19 at kernel/cpu.c")
        return run(command)

    monkeypatch.setattr(guest.shell, "run", splat_on_restore)
    fresh = get(pool)
    assert (fresh is not guest, guest.stopped) == (True, True)


def test_a_baseline_that_cannot_be_read_is_a_boot_failure(
    pool: GuestPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeGuestShell, "run", BrokenShell.run)
    with pytest.raises(TransportError) as failed:
        pool.get(FOUR)
    (guest,) = FakeGuest.booted
    assert guest.stopped
    with pytest.raises(HarnessError) as again:  # remembered: no second boot
        pool.get(FOUR)
    assert (again.value, len(FakeGuest.booted)) == (failed.value, 1)


class FakeStore:
    """Stands in for `SnapshotStore`: every start is a new, entered `FakeGuest`."""

    def __init__(self, failure: HarnessError | None = None) -> None:
        self.failure = failure
        self.workdirs: list[Path] = []

    def start(self, spec: MachineSpec, images: GuestImages, workdir: Path, *,
              name: str) -> FakeGuest:  # fmt: skip
        self.workdirs.append(workdir)
        if self.failure is not None:
            raise self.failure
        return FakeGuest(spec, images, workdir, timeouts=Timeouts(), name=name).__enter__()


def snapshot_pool(tmp_path: Path, store: FakeStore) -> GuestPool:
    FakeGuest.booted = []
    base = MachineSpec(arch=arches.get("arm64"), topology=CpuTopology())
    return GuestPool(base, cast(GuestImages, None), tmp_path, prefix="gw0", timeouts=Timeouts(),
                     snapshots=cast(SnapshotStore, store))  # fmt: skip


def test_with_snapshots_the_first_guest_is_restored_and_a_clean_one_reused(
    tmp_path: Path,
) -> None:
    store = FakeStore()
    pool = snapshot_pool(tmp_path, store)
    one = get(pool)
    assert get(pool) is one
    assert one.shell.commands == [STATE_COMMAND, CHECK]  # the baseline, then the check
    assert len(store.workdirs) == 1


def test_with_snapshots_a_guest_that_cannot_be_put_back_is_replaced_by_a_restore(
    tmp_path: Path,
) -> None:
    store = FakeStore()
    pool = snapshot_pool(tmp_path, store)
    one = get(pool)
    one.shell.stuck = frozenset({3})
    one.shell.online.discard(3)
    two = get(pool)
    assert two is not one
    assert one.stopped
    assert FakeGuest.booted == [one, two]
    assert len(set(store.workdirs)) == 2, "restores share an artifact directory"
    pool.close()
    assert two.stopped


def test_with_snapshots_a_dead_guest_is_replaced_without_ssh(tmp_path: Path) -> None:
    store = FakeStore()
    pool = snapshot_pool(tmp_path, store)
    one = get(pool)
    one.vm.status = -9
    assert get(pool) is not one
    assert one.shell.commands == [STATE_COMMAND]
    assert len(store.workdirs) == 2


def test_with_snapshots_a_failed_restore_is_remembered(tmp_path: Path) -> None:
    store = FakeStore(failure=SnapshotError("QEMU refused to load it", "status failed"))
    pool = snapshot_pool(tmp_path, store)
    with pytest.raises(SnapshotError) as failed:
        pool.get(FOUR)
    with pytest.raises(HarnessError) as again:
        pool.get(FOUR)
    assert (again.value, len(store.workdirs)) == (failed.value, 1)
