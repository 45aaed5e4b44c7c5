"""GuestVM launch failures, with trivial real processes standing in for QEMU."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import arches
from harness.builder.images import BootFiles
from harness.errors import ConfigError, HostSetupError, VmLaunchError
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.machine import GuestVM, VmState
from harness.vm.topology import CpuTopology

SPEC = MachineSpec(arch=arches.get("arm64"), topology=CpuTopology())
FAST = Timeouts(qmp_s=5.0, shutdown_s=2.0)


@pytest.fixture
def files(tmp_path: Path) -> BootFiles:
    kernel, initrd = tmp_path / "Image", tmp_path / "rootfs.cpio.gz"
    kernel.write_bytes(b"not a kernel")
    initrd.write_bytes(b"not an initramfs")
    return BootFiles(kernel, initrd)


def test_a_missing_qemu_binary_names_the_package_and_the_fix(
    files: BootFiles, tmp_path: Path
) -> None:
    vm = GuestVM(SPEC, files, tmp_path / "run", name="t", timeouts=FAST,
                 qemu_binary="qemu-system-nonexistent")  # fmt: skip
    with pytest.raises(HostSetupError) as missing:
        vm.launch()
    assert "qemu-system-nonexistent" in str(missing.value)
    assert "invoke setup" in str(missing.value)
    assert "qemu-system-arm" in str(missing.value)
    assert vm.pid is None


def test_a_missing_kernel_says_how_to_build_it(files: BootFiles, tmp_path: Path) -> None:
    files.kernel.unlink()
    vm = GuestVM(SPEC, files, tmp_path / "run", name="t", timeouts=FAST, qemu_binary="true")
    with pytest.raises(ConfigError, match="invoke kernel"):
        vm.launch()
    assert vm.pid is None


def test_a_process_that_exits_before_qmp_is_a_launch_error(
    files: BootFiles, tmp_path: Path
) -> None:
    vm = GuestVM(SPEC, files, tmp_path / "run", name="t", timeouts=FAST, qemu_binary="false")
    with pytest.raises(VmLaunchError) as failed:
        vm.launch()
    assert failed.value.exitcode == 1
    assert failed.value.argv[0] == "false"
    assert "-smp" in failed.value.argv
    assert vm.state is VmState.STOPPED
    assert (tmp_path / "run" / "argv.txt").read_text().startswith("false -nodefaults")


def test_shutdown_is_idempotent_before_and_after_launch(files: BootFiles, tmp_path: Path) -> None:
    vm = GuestVM(SPEC, files, tmp_path / "run", name="t", timeouts=FAST, qemu_binary="false")
    assert vm.shutdown() == 0.0
    assert vm.shutdown() == 0.0
    assert vm.state is VmState.STOPPED
