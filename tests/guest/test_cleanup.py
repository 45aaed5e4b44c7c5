"""Failures are classified by their evidence, and no QEMU outlives its run."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.builder.images import GuestImages
from harness.errors import BootHang, GuestCrash, InfraError
from harness.timeouts import Timeouts, wait_until
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology
from tests.guest.procs import as_if_typed, process_gone

pytestmark = [pytest.mark.guest, pytest.mark.selftest]
REPO = Path(__file__).resolve().parents[2]

GuestFactory = Callable[..., Guest]


@pytest.fixture
def make_guest(
    base_setup: tuple[MachineSpec, GuestImages], tmp_path: Path, timeouts: Timeouts
) -> GuestFactory:
    """A private guest (never shared: these tests break their guests)."""
    spec, images = base_setup

    def make(*, kernel_args: tuple[str, ...] = (), budget: Timeouts = timeouts,
             cpus: int = 2) -> Guest:  # fmt: skip
        own = dataclasses.replace(spec, topology=CpuTopology(cores=cpus), kernel_args=kernel_args)
        return Guest(own, images, tmp_path / "run", timeouts=budget)

    return make


def verdict(guest: Guest) -> dict[str, object]:
    data: dict[str, object] = json.loads(guest.record.path.read_text())["verdict"]
    return data


def test_a_panic_is_a_guest_crash_with_its_lines_and_qemu_is_gone(
    make_guest: GuestFactory, timeouts: Timeouts
) -> None:
    guest = make_guest()

    def crash_it() -> None:
        with guest:
            guest.shell.run(
                "echo c > /proc/sysrq-trigger", check=False, timeout_s=60 * timeouts.scale
            )

    with pytest.raises(GuestCrash) as crash:
        crash_it()
    assert "panic" in crash.value.reason
    assert "Kernel panic - not syncing" in crash.value.evidence
    assert "sysrq" in crash.value.evidence.lower()
    assert guest.vm.pid is not None
    assert process_gone(guest.vm.pid)
    assert verdict(guest)["blame"] == "guest"


def test_qemu_killed_mid_run_is_a_host_failure_and_nothing_is_left(
    make_guest: GuestFactory, timeouts: Timeouts
) -> None:
    guest = make_guest()

    def kill_qemu_then_use_the_guest() -> None:
        with guest:
            os.kill(guest.vm.pid or 0, signal.SIGKILL)
            wait_until(lambda: True if guest.vm.exitcode() is not None else None,
                       timeout_s=timeouts.shutdown_s, what="QEMU to die")  # fmt: skip
            guest.shell.run("true", timeout_s=10 * timeouts.scale)

    with pytest.raises(InfraError):
        kill_qemu_then_use_the_guest()
    assert guest.vm.pid is not None
    assert process_gone(guest.vm.pid)
    assert verdict(guest)["blame"] == "infra"


def test_a_kernel_that_goes_silent_is_a_boot_hang(
    make_guest: GuestFactory, timeouts: Timeouts
) -> None:
    # busybox as PID 1 running `sleep`: the kernel prints, then nothing ever answers.
    # A short silence (scaled: a slow host pauses longer between boot lines) ends it early.
    budget = dataclasses.replace(timeouts, silence_s=4.0 * timeouts.scale,
                                 boot_s=max(timeouts.boot_s, 60.0 * timeouts.scale))  # fmt: skip
    guest = make_guest(kernel_args=("rdinit=/bin/busybox", "--", "sleep", "1000"), budget=budget)
    with pytest.raises(BootHang) as hang, guest:
        pytest.fail("the guest booted")  # and leaving the block stopped it
    assert "went silent" in hang.value.reason
    assert "Run /bin/busybox as init process" in hang.value.evidence
    assert guest.vm.pid is not None
    assert process_gone(guest.vm.pid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])  # fmt: skip
def test_a_signalled_harness_leaves_no_qemu(
    signum: int, tmp_path: Path, base_setup: tuple[MachineSpec, GuestImages], timeouts: Timeouts
) -> None:
    # Reset first: a runner started as `nohup .ci/run &` passes SIGINT down ignored.
    holder = subprocess.Popen(
        as_if_typed([sys.executable, "-m", "tests.guest.hold_guest", str(tmp_path)]),
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()  # blocks until the guest is up (or the holder died)
        assert line.startswith("QEMU_PID "), f"holder said {line!r}"
        pid = int(line.split()[1])
        assert not process_gone(pid)
        holder.send_signal(signum)
        holder.wait(timeout=60 * timeouts.scale)  # it stops its guest, then exits
        wait_until(lambda: True if process_gone(pid) else None, timeout_s=timeouts.shutdown_s,
                   what=f"QEMU {pid} to be gone after {signal.Signals(signum).name}")  # fmt: skip
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    if signum != signal.SIGKILL:  # a clean unwind also recorded why the run ended
        record = json.loads((tmp_path / "run.json").read_text())
        assert record["verdict"]["blame"] == "interrupted"
