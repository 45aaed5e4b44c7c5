"""Booted guests match their request: topology from both sides, PMU, pseudo-NMI.

Whether PMU interrupts arrive as NMIs is shown with the agent's core: the kernel's own
count of them and the agent's IRQ-off probe (see `test_pmu_is_present_and_delivers_nmis`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent.driver import Agent
from harness.agent.flavours.tprof.run import tprof_run
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import SamplingPlan
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


def test_pmu_is_present_and_delivers_nmis(
    guest: Guest, topology: CpuTopology, agent: Agent
) -> None:
    """Overflow interrupts reach every CPU, counted by the kernel itself, and with
    pseudo-NMI on they are NMIs: each one the kernel counted ran the agent's handler with
    in_nmi() true, and some landed inside an IRQ-off window, where only an NMI can land.
    With it off none of that holds."""
    spec = guest.spec
    if not spec.arch.has_pmu(spec.accel):
        pytest.skip(
            f"{spec.arch.name} under {spec.accel} has no PMU (the guest kernel says: "
            "PMU not available due to virtualization, using software events only): "
            "on arm64, `invoke test --arch arm64 -k test_pmu_is_present`"
        )
    facts = guest.facts
    assert facts.pmu_driver is not None
    assert facts.pmu_counters > 0
    if spec.arch.pseudo_nmi_arg is not None:
        assert facts.pseudo_nmi is spec.nmi
        assert facts.pmu_uses_nmi is spec.nmi
        assert f"{spec.arch.pseudo_nmi_arg}={int(spec.nmi)}" in facts.cmdline
    cpus = tuple(range(topology.cpus))
    run = tprof_run(agent, AgentSpec(), SamplingPlan(busy_cpus=cpus, probe_cpus=cpus))
    assert run.kernel is not None  # /proc/interrupts read before START and after STOP
    for cpu in cpus:
        taken, core = run.kernel.delta(cpu), run.counters.core[cpu]
        assert taken, f"CPU {cpu}: the kernel handled no {run.kernel.label} interrupt"
        assert core["x_nmi_total"] == taken, f"CPU {cpu}: the handler ran for another count"
        assert core["x_nmi_ctx_ok"] == (taken if spec.nmi else 0), f"CPU {cpu}: {core}"
        inside = core["x_probe_hits"]  # overflows while the probe spun with IRQs masked
        assert (inside > 0) is spec.nmi, f"CPU {cpu}: {inside} in the IRQ-off window"


def test_every_cpu_can_be_offlined_and_onlined(guest: Guest, topology: CpuTopology) -> None:
    if topology.cpus == 1:
        pytest.skip("CPU 0 is the only CPU; hotplug needs a second one: "
                    "`invoke test --cpus 2 -k test_every_cpu_can_be_offlined`")  # fmt: skip
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
    # An earlier timeout on this pooled guest (or an earlier guest in the same workdir)
    # left its own files: only what this timeout wrote counts.
    sizes = {path: path.stat().st_size for path in guest.workdir.glob("vcpus-*.txt")}
    with pytest.raises(GuestCommandTimeout) as caught:
        guest.shell.run("sleep 5", timeout_s=1.0)
    message = str(caught.value)
    assert "vCPU PCs 0: " in message
    named = message.split("vCPU PCs ", 1)[1].split(";", 1)[0].split(", ")
    assert len(named) == topology.cpus
    # idle vCPUs wait in the kernel's text: each PC is a symbol, not a bare address
    assert all("+0x" in where for where in named), named
    kept = Path(message.split("(registers in ", 1)[1].split(")", 1)[0])
    assert kept.parent == guest.workdir, message
    with kept.open() as registers:
        registers.seek(sizes.get(kept, 0))
        written = registers.read()
    assert "PC=" in written or "RIP=" in written, f"{kept} got no registers: {written[:200]!r}"
