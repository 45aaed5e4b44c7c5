"""x86_64 under TCG boots, and is reported as having no PMU (so PMU tests skip)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import arches
from harness.builder.cache import Cache
from harness.builder.images import prepare_images
from harness.builder.kernel import KernelRequest, find_kernel
from harness.timeouts import Timeouts
from harness.vm.accel import boot_probe
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.preflight import check_facts
from harness.vm.topology import CpuTopology

pytestmark = [pytest.mark.guest, pytest.mark.selftest]
X86 = arches.get("x86_64")


def test_x86_64_under_tcg_boots_with_software_events_only(
    cache: Cache, tmp_path: Path, timeouts: Timeouts
) -> None:
    if find_kernel(KernelRequest(arch=X86), cache) is None:
        pytest.skip(
            "no x86_64 kernel in the cache; `invoke images --arch x86_64` builds it "
            "(`invoke ci` does)"
        )
    images = prepare_images(X86, "default", cache)
    spec = MachineSpec(arch=X86, topology=CpuTopology(cores=2), accel="tcg")
    with Guest(spec, images, tmp_path / "x86", timeouts=timeouts) as guest:
        assert guest.facts.software_events_only
        assert guest.facts.pmu_driver is None
        assert check_facts(spec, guest.facts) == []
        assert guest.shell.run("uname -m").stdout.strip() == "x86_64"


@pytest.mark.parametrize("arch", sorted(arches.ARCHES))
def test_kvm_probe_kernel_really_boots_under_tcg(arch: str) -> None:
    # The probe kernel must print its marker wherever a CPU runs it; under TCG it
    # always can, so a failed KVM probe means KVM, not the probe.
    works, reason = boot_probe(arches.get(arch), accel="tcg")
    assert works, reason
