"""The debug kernel variant boots with its checkers armed, and stays silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import arches
from harness.builder.cache import Cache
from harness.builder.images import prepare_images
from harness.builder.kernel import KernelRequest, find_kernel
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology

pytestmark = [pytest.mark.guest, pytest.mark.selftest]
ARM64 = arches.get("arm64")


def test_debug_kernel_boots_with_lockdep_and_atomic_sleep_checks(
    cache: Cache, tmp_path: Path, timeouts: Timeouts
) -> None:
    if find_kernel(KernelRequest(arch=ARM64, variant="debug"), cache) is None:
        pytest.skip(
            "no debug kernel in the cache; `invoke kernel --variant debug` builds it "
            "(`invoke ci` does)"
        )
    images = prepare_images(ARM64, "debug", cache)
    spec = MachineSpec(arch=ARM64, topology=CpuTopology(sockets=2, cores=1, threads=1))
    with Guest(spec, images, tmp_path / "debug", timeouts=timeouts.scaled_by(2)) as guest:
        stats = guest.shell.run("cat /proc/lockdep_stats").stdout
        assert "debug_locks:                             1" in stats or " debug_locks: 1" in (
            " ".join(stats.split()) + " "
        )
        config = guest.shell.run("zcat /proc/config.gz").stdout.splitlines()
        for option in ("CONFIG_PROVE_LOCKING=y", "CONFIG_DEBUG_ATOMIC_SLEEP=y",
                       "CONFIG_DEBUG_KMEMLEAK=y", "CONFIG_ARM64_PSEUDO_NMI=y"):  # fmt: skip
            assert option in config
        assert guest.facts.pseudo_nmi
        guest.shell.run("echo 0 > /sys/devices/system/cpu/cpu1/online; "
                        "echo 1 > /sys/devices/system/cpu/cpu1/online")  # fmt: skip
    # Leaving the block scanned the console: no lockdep, BUG or WARNING line appeared.
