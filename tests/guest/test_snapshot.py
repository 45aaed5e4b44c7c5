"""Snapshot reset for real: restored guests sample, start clean, and bad snapshots are rebuilt.

The first two tests use the session's pool (a restored guest per test, unless the
run says ``--no-snapshot``, where they skip). The others are the harness's own
failure paths (marker ``selftest``, like ``test_cleanup.py``); they keep their
snapshots in a private cache under ``tmp_path``, so breaking one never touches the
shared cache.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours.tprof.run import tprof_run
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import SamplingPlan
from harness.builder.cache import Cache, file_sha256
from harness.builder.images import GuestImages
from harness.errors import SnapshotError
from harness.timeouts import Timeouts, wait_until
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.pool import GuestPool
from harness.vm.snapshot import STATE_FILE
from harness.vm.snapstore import KIND, SnapshotStore
from harness.vm.topology import CpuTopology
from tests.guest.procs import as_if_typed, process_gone, qemu_children
from tests.guest.verdicts import assert_held

pytestmark = pytest.mark.guest
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def restored(guest: Guest) -> Guest:
    """The test's guest, which must come from a snapshot."""
    if guest.snapshot is None:
        pytest.skip("the run boots guests cold (--no-snapshot): `invoke test -k test_snapshot`")
    return guest


def test_a_restored_guest_samples_with_pmu_nmis(
    restored: Guest, agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    # PMU registers and GICv3 priorities come from the migration stream, not a boot.
    cpus = tuple(range(topology.cpus))
    plan = SamplingPlan(busy_cpus=cpus, probe_cpus=(cpus[-1],))
    run = tprof_run(agent, AgentSpec(), plan)
    assert_held(behaviour("tprof"), run, request)
    # The kernel's own count of PMU interrupts, read just before START and after STOP.
    assert run.kernel is not None
    taken = {cpu: run.kernel.delta(cpu) for cpu in cpus}
    for cpu in cpus:
        assert run.counters.core[cpu]["x_nmi_total"] > 0, f"CPU {cpu} took no PMU NMI"
        assert (taken[cpu] or 0) > 0, f"the kernel handled no PMU interrupt on CPU {cpu}: {taken}"


def test_a_cpu_offlined_by_one_test_is_online_in_the_next(
    restored: Guest, pool: GuestPool, topology: CpuTopology, timeouts: Timeouts
) -> None:
    if topology.cpus < 2:
        pytest.skip("needs a second CPU to offline: `invoke test --cpus 2 -k test_a_cpu_offlined`")
    last = topology.cpus - 1
    read = "cat /sys/devices/system/cpu/online /proc/sys/kernel/perf_cpu_time_max_percent"
    at_start = restored.shell.run(read).stdout.split()
    restored.shell.run(f"echo 0 > /sys/devices/system/cpu/cpu{last}/online")
    restored.shell.run("echo 7 > /proc/sys/kernel/perf_cpu_time_max_percent")
    assert pool.get(topology).shell.run(read).stdout.split() == at_start  # what the next sees
    # A guest that cannot be put back (here: its QEMU killed) is replaced by a restore.
    spoiled = pool.get(topology)
    spoiled.shell.run(f"echo 0 > /sys/devices/system/cpu/cpu{last}/online")
    pid = spoiled.vm.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: True if spoiled.vm.exitcode() is not None else None,
               timeout_s=timeouts.shutdown_s, what="the killed QEMU to exit")  # fmt: skip
    fresh = pool.get(topology)
    assert fresh.vm.pid != pid
    assert fresh.snapshot is not None
    assert fresh.shell.run(read).stdout.split() == at_start


@pytest.fixture
def private(
    base_setup: tuple[MachineSpec, GuestImages], tmp_path: Path
) -> tuple[MachineSpec, GuestImages, Cache]:
    """A 2-vCPU spec, the session's images, and a snapshot cache of this test's own."""
    spec, images = base_setup
    return dataclasses.replace(spec, topology=CpuTopology(cores=2)), images, Cache(tmp_path / "c")


@pytest.fixture
def qemus_before() -> frozenset[int]:
    """This process's QEMU children before the test: a pooled guest of an earlier test may
    still run (whether one does depends only on the order the session chose)."""
    return frozenset(qemu_children(os.getpid()))


def left_running(before: frozenset[int]) -> list[int]:
    """QEMU children of this process that were not running at ``before``."""
    return sorted(set(qemu_children(os.getpid())) - before)


def _restore_once(store: SnapshotStore, setup: tuple[MachineSpec, GuestImages, Cache],
                  workdir: Path) -> tuple[int | None, str]:  # fmt: skip
    spec, images, _ = setup
    guest = store.start(spec, images, workdir, name=workdir.name)
    try:
        return guest.vm.pid, guest.shell.run("cat /sys/devices/system/cpu/online").stdout.strip()
    finally:
        guest.__exit__(None, None, None)


def _entry(setup: tuple[MachineSpec, GuestImages, Cache]) -> Path:
    (entry,) = (p for p in (setup[2].root / KIND).iterdir() if p.is_dir())
    return entry


@pytest.mark.selftest
def test_a_corrupted_snapshot_is_rebuilt_not_trusted(
    private: tuple[MachineSpec, GuestImages, Cache], timeouts: Timeouts, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, qemus_before: frozenset[int],
) -> None:  # fmt: skip
    _restore_once(SnapshotStore(private[2], timeouts), private, tmp_path / "first")
    entry = _entry(private)
    saved = json.loads((entry / "manifest.json").read_text())
    with (entry / STATE_FILE).open("r+b") as state:  # same size, other bytes
        state.seek(saved["state_bytes"] // 2)
        state.write(b"\xa5" * 4096)
    store = SnapshotStore(private[2], timeouts)  # a new process: hashes before trusting
    with caplog.at_level(logging.WARNING, logger="harness.vm.snapstore"):
        pid, online = _restore_once(store, private, tmp_path / "second")
    assert online == "0-1"
    assert len(store.rebuilds) == 1, store.rebuilds
    assert "sha256" in store.rebuilds[0]
    assert "is not trusted" in caplog.text
    rebuilt = json.loads((entry / "manifest.json").read_text())
    assert rebuilt["built_at"] != saved["built_at"]
    assert file_sha256(entry / STATE_FILE) == rebuilt["state_sha256"]
    assert pid is not None
    assert process_gone(pid)
    assert left_running(qemus_before) == []


@pytest.mark.selftest
def test_an_unloadable_snapshot_is_a_host_error_with_evidence_then_rebuilt(
    private: tuple[MachineSpec, GuestImages, Cache], timeouts: Timeouts, tmp_path: Path,
    qemus_before: frozenset[int],
) -> None:  # fmt: skip
    store = SnapshotStore(private[2], timeouts)
    _restore_once(store, private, tmp_path / "first")
    entry = _entry(private)
    state = entry / STATE_FILE
    with state.open("r+b") as stream:  # a stream cut short, with a manifest that matches it
        stream.truncate(state.stat().st_size // 3)
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest.update(state_bytes=state.stat().st_size, state_sha256=file_sha256(state))
    (entry / "manifest.json").write_text(json.dumps(manifest))
    snapshot, _ = SnapshotStore(private[2], timeouts).obtain(private[0], private[1], tmp_path)
    guest = Guest(private[0], private[1], tmp_path / "direct", timeouts=timeouts,
                  snapshot=snapshot)  # fmt: skip
    with pytest.raises(SnapshotError) as failed, guest:
        pytest.fail("a third of a migration stream loaded")
    assert "while loading" in failed.value.reason
    assert "--- QEMU output ---" in failed.value.evidence
    assert "load of migration failed" in failed.value.evidence
    assert guest.vm.pid is not None
    assert process_gone(guest.vm.pid)
    assert json.loads(guest.record.path.read_text())["verdict"]["blame"] == "infra"
    _, online = _restore_once(store, private, tmp_path / "again")  # rebuilt, then restored
    assert online == "0-1"
    assert any("could not restore" in reason for reason in store.rebuilds), store.rebuilds
    assert left_running(qemus_before) == []


@pytest.mark.selftest
def test_a_signalled_harness_leaves_no_restored_qemu(tmp_path: Path, timeouts: Timeouts) -> None:
    # Reset first: a runner started as `nohup .ci/run &` passes SIGINT down ignored.
    holder = subprocess.Popen(
        as_if_typed([sys.executable, "-m", "tests.guest.hold_guest", str(tmp_path), "--snapshot"]),
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()  # blocks until the guest is up (or the holder died)
        assert line.startswith("QEMU_PID "), f"holder said {line!r}"
        pid = int(line.split()[1])
        assert "-incoming" in Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=60 * timeouts.scale)
        wait_until(lambda: True if process_gone(pid) else None, timeout_s=timeouts.shutdown_s,
                   what=f"restored QEMU {pid} to be gone after SIGTERM")  # fmt: skip
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
