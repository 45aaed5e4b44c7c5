"""Booted guests match their request: topology from both sides, PMU, pseudo-NMI."""

from __future__ import annotations

import pytest

from harness.vm.guest import Guest
from harness.vm.ssh import GuestCommandTimeout
from harness.vm.topology import CpuTopology, check_guest_topology, check_qmp_topology

pytestmark = pytest.mark.guest


def test_guest_kernel_sees_the_requested_topology(guest: Guest, topology: CpuTopology) -> None:
    places = guest.facts.places
    assert guest.facts.cpus_online == topology.cpus
    assert int(guest.shell.run("nproc").stdout) == topology.cpus
    assert len({p.socket for p in places}) == topology.sockets
    assert len({(p.socket, p.cluster) for p in places}) == topology.sockets * topology.clusters
    assert {len(p.thread_siblings) for p in places} == {topology.threads}
    assert check_guest_topology(topology, places) == []


def test_qemu_reports_the_requested_topology(guest: Guest, topology: CpuTopology) -> None:
    cpus = guest.vm.qmp.execute("query-cpus-fast")
    assert len(cpus) == topology.cpus
    assert max(c["props"].get("socket-id", 0) for c in cpus) == topology.sockets - 1
    assert max(c["props"].get("thread-id", 0) for c in cpus) == topology.threads - 1
    assert check_qmp_topology(topology, cpus) == []


def test_pmu_is_present_and_delivers_nmis(guest: Guest, topology: CpuTopology) -> None:
    spec = guest.spec
    if not spec.arch.has_pmu(spec.accel):
        pytest.skip(
            f"{spec.arch.name} under {spec.accel} has no PMU (the guest kernel says: "
            "PMU not available due to virtualization, using software events only)"
        )
    facts = guest.facts
    assert facts.pmu_driver is not None
    assert facts.pmu_counters > 0
    assert spec.arch.pmu_interrupt_label in guest.shell.run("cat /proc/interrupts").stdout
    if spec.arch.pseudo_nmi_arg is not None:
        assert facts.pseudo_nmi is spec.nmi
        assert facts.pmu_uses_nmi is spec.nmi
        assert f"{spec.arch.pseudo_nmi_arg}={int(spec.nmi)}" in facts.cmdline


def test_every_cpu_can_be_offlined_and_onlined(guest: Guest, topology: CpuTopology) -> None:
    if topology.cpus == 1:
        pytest.skip("CPU 0 is the only CPU; hotplug needs a second one")
    last = topology.cpus - 1
    online = f"/sys/devices/system/cpu/cpu{last}/online"
    guest.shell.run(f"echo 0 > {online}")
    try:
        assert guest.shell.run("cat /sys/devices/system/cpu/online").stdout.strip() == (
            f"0-{last - 1}" if last > 1 else "0"
        )
    finally:
        guest.shell.run(f"echo 1 > {online}")
    assert int(guest.shell.run("nproc").stdout) == topology.cpus


def test_a_command_that_outlives_its_deadline_says_where_every_vcpu_is(
    guest: Guest, topology: CpuTopology
) -> None:
    """A timeout carries each vCPU's PC named from System.map, and keeps the registers."""
    with pytest.raises(GuestCommandTimeout) as caught:
        guest.shell.run("sleep 5", timeout_s=1.0)
    message = str(caught.value)
    assert "vCPU PCs 0: " in message
    named = message.split("vCPU PCs ", 1)[1].split(";", 1)[0].split(", ")
    assert len(named) == topology.cpus
    # idle vCPUs wait in the kernel's text: each PC is a symbol, not a bare address
    assert all("+0x" in where for where in named), named
    kept = sorted(guest.workdir.glob("vcpus-*.txt"))
    assert kept
    assert "PC=" in kept[-1].read_text() or "RIP=" in kept[-1].read_text()
