from __future__ import annotations

from dataclasses import replace

from harness import arches
from harness.vm.argv import MachineSpec
from harness.vm.preflight import (
    FACTS_COMMAND,
    GuestFacts,
    check_facts,
    check_variant_facts,
    parse_facts,
    split_sections,
)
from harness.vm.topology import CpuTopology
from tests.unit.golden import LOGS_DIR

TOPO_8 = CpuTopology(sockets=2, clusters=2, cores=1, threads=2)
ARM64_NMI = MachineSpec(arch=arches.get("arm64"), topology=TOPO_8, nmi=True)
ARM64_IRQ = replace(ARM64_NMI, nmi=False)

PSEUDO_NMI_LINE = (
    "[    0.000000] GICv3: Pseudo-NMIs enabled using relaxed ICC_PMR_EL1 synchronisation"
)
PMU_LINE = "[    0.069881] hw perfevents: enabled with armv8_pmuv3 PMU driver, 7 counters available"


def arm64_topology(cpus: int) -> str:
    """sysfs of a 2s2cl1c2t-style layout: cpu = socket*4 + cluster*2 + thread."""
    lines = []
    for cpu in range(cpus):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        first = cpu - cpu % 2
        lines += [
            f"{base}/cluster_id:{(cpu // 2) % 2}",
            f"{base}/core_id:{cpu // 2}",
            f"{base}/physical_package_id:{cpu // 4}",
            f"{base}/thread_siblings_list:{first}-{first + 1}",
        ]
    return "\n".join(lines)


def arm64_output(*, cpus: int = 8, nmi: bool = True, pmu: bool = True) -> str:
    """What FACTS_COMMAND prints in an arm64 TCG guest."""
    dmesg = [
        "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]",
        "[    0.000000] GICv3: 224 SPIs implemented",
        *([PSEUDO_NMI_LINE] if nmi else []),
        "[    0.001000] smp: Brought up 1 node, 8 CPUs",
        *([PMU_LINE + (", using NMIs" if nmi else "")] if pmu else []),
    ]
    nmi_arg = f"irqchip.gicv3_pseudo_nmi={int(nmi)}"
    return "\n".join(
        [
            "### online",
            f"0-{cpus - 1}",
            "### release",
            "6.1.0",
            "### cmdline",
            f"console=ttyAMA0 rdinit=/init panic=-1 {nmi_arg}",
            "### dmesg",
            *dmesg,
            "### topology",
            arm64_topology(cpus),
            "### event_sources",
            "armv8_pmuv3",
            "breakpoint",
            "software",
            "tracepoint",
        ]
    )


def test_facts_command_prints_every_section_header() -> None:
    headers = [part.split("'")[1] for part in FACTS_COMMAND.split("; ") if part.startswith("echo")]
    assert headers == [
        "### online",
        "### release",
        "### cmdline",
        "### dmesg",
        "### topology",
        "### event_sources",
    ]


def test_split_sections_keeps_unknown_headers_as_content() -> None:
    text = "noise\n### release\n6.1.0\n### not-a-section\n### online\n0-1\n"
    assert split_sections(text) == {"release": "6.1.0\n### not-a-section", "online": "0-1"}


def test_parse_arm64_facts_with_pseudo_nmi() -> None:
    facts = parse_facts(arm64_output())
    assert replace(facts, places=()) == GuestFacts(
        cpus_online=8,
        kernel_release="6.1.0",
        cmdline="console=ttyAMA0 rdinit=/init panic=-1 irqchip.gicv3_pseudo_nmi=1",
        pmu_driver="armv8_pmuv3",
        pmu_counters=7,
        pmu_uses_nmi=True,
        pseudo_nmi=True,
        software_events_only=False,
        places=(),
    )
    assert [p.cpu for p in facts.places] == list(range(8))


def test_parse_arm64_facts_without_nmi() -> None:
    facts = parse_facts(arm64_output(nmi=False))
    assert (facts.pmu_driver, facts.pmu_uses_nmi, facts.pseudo_nmi) == ("armv8_pmuv3", False, False)


X86_TCG_OUTPUT = "\n".join(
    [
        "### online",
        "0-1",
        "### release",
        "6.1.0",
        "### cmdline",
        "console=ttyS0 rdinit=/init panic=-1",
        "### dmesg",
        "[    0.000000] Linux version 6.1.0 (root@build) (gcc) #1 SMP",
        "[    0.151234] Performance Events: PMU not available due to virtualization, "
        "using software events only.",
        "[    0.160000] smp: Brought up 1 node, 2 CPUs",
        "### topology",
        "/sys/devices/system/cpu/cpu0/topology/cluster_id:0",
        "/sys/devices/system/cpu/cpu0/topology/core_id:0",
        "/sys/devices/system/cpu/cpu0/topology/physical_package_id:0",
        "/sys/devices/system/cpu/cpu0/topology/thread_siblings:3",
        "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list:0-1",
        "/sys/devices/system/cpu/cpu1/topology/cluster_id:0",
        "/sys/devices/system/cpu/cpu1/topology/core_id:0",
        "/sys/devices/system/cpu/cpu1/topology/physical_package_id:0",
        "/sys/devices/system/cpu/cpu1/topology/thread_siblings:3",
        "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list:0-1",
        "### event_sources",
        "breakpoint",
        "software",
        "tracepoint",
    ]
)
X86_SPEC = MachineSpec(arch=arches.get("x86_64"), topology=CpuTopology(threads=2))


def test_parse_x86_tcg_facts_software_events_only() -> None:
    facts = parse_facts(X86_TCG_OUTPUT)
    assert (facts.pmu_driver, facts.pmu_counters, facts.software_events_only) == (None, 0, True)


def test_parse_x86_kvm_facts() -> None:
    kvm = X86_TCG_OUTPUT.replace(
        "Performance Events: PMU not available due to virtualization, using software events only.",
        "Performance Events: Skylake events, full-width counters, Intel PMU driver.\n"
        "[    0.151300] ... version:                2\n"
        "[    0.151310] ... bit width:              48\n"
        "[    0.151320] ... generic registers:      4",
    )
    facts = parse_facts(kvm)
    assert (facts.pmu_driver, facts.pmu_counters, facts.pmu_uses_nmi) == ("Intel", 4, True)


# --- check_facts ----------------------------------------------------------------------------


def test_check_facts_matching_arm64_guest() -> None:
    assert check_facts(ARM64_NMI, parse_facts(arm64_output())) == []


def test_check_facts_matching_arm64_guest_without_nmi() -> None:
    assert check_facts(ARM64_IRQ, parse_facts(arm64_output(nmi=False))) == []


def test_check_facts_pseudo_nmi_requested_but_absent() -> None:
    problems = check_facts(ARM64_NMI, parse_facts(arm64_output(nmi=False)))
    assert problems == [
        "pseudo-NMI was requested but the guest did not enable it "
        "(pseudo-NMI: False, PMU using NMIs: False)"
    ]


def test_check_facts_nmi_off_but_enabled() -> None:
    problems = check_facts(ARM64_IRQ, parse_facts(arm64_output(nmi=True)))
    assert problems == ["NMI mode is off but the guest enabled pseudo-NMI"]


def test_check_facts_cpu_count_differs() -> None:
    problems = check_facts(ARM64_NMI, parse_facts(arm64_output(cpus=4)))
    assert problems == ["4 CPUs online, asked for 8", "guest has 4 CPUs in sysfs, asked for 8"]


def test_check_facts_no_pmu_driver_on_arm64() -> None:
    problems = check_facts(ARM64_NMI, parse_facts(arm64_output(pmu=False)))
    assert problems[0].startswith("no hardware PMU driver registered (expected one: arm64 on tcg)")


def test_check_facts_x86_tcg_does_not_expect_a_pmu() -> None:
    assert check_facts(X86_SPEC, parse_facts(X86_TCG_OUTPUT)) == []


def test_check_facts_x86_kvm_expects_a_pmu() -> None:
    problems = check_facts(replace(X86_SPEC, accel="kvm"), parse_facts(X86_TCG_OUTPUT))
    assert [p.split(" (")[0] for p in problems] == ["no hardware PMU driver registered"]


# --- recorded from real arm64 TCG guests ----------------------------------------------------

ARM64_1CPU_IRQ = MachineSpec(arch=arches.get("arm64"), topology=CpuTopology(), nmi=False)


def recorded(name: str) -> str:
    return (LOGS_DIR / name).read_text()


def test_parse_recorded_2s2cl1c2t_guest() -> None:
    facts = parse_facts(recorded("arm64-facts-2s2cl1c2t.txt"))
    assert (facts.cpus_online, facts.kernel_release, len(facts.places)) == (8, "6.1.192", 8)
    assert (facts.pmu_driver, facts.pmu_counters, facts.pmu_uses_nmi, facts.pseudo_nmi) == (
        "armv8_pmuv3",
        7,
        True,
        True,
    )
    assert facts.cmdline.endswith("irqchip.gicv3_pseudo_nmi=1")


def test_parse_recorded_1cpu_guest_without_nmi() -> None:
    facts = parse_facts(recorded("arm64-facts-1cpu-nmi-off.txt"))
    assert (facts.cpus_online, facts.pmu_driver, facts.pmu_uses_nmi, facts.pseudo_nmi) == (
        1,
        "armv8_pmuv3",
        False,
        False,
    )


def test_recorded_2s2cl1c2t_guest_is_as_asked() -> None:
    assert check_facts(ARM64_NMI, parse_facts(recorded("arm64-facts-2s2cl1c2t.txt"))) == []


def test_recorded_1cpu_guest_is_as_asked() -> None:
    facts = parse_facts(recorded("arm64-facts-1cpu-nmi-off.txt"))
    assert check_facts(ARM64_1CPU_IRQ, facts) == []


def test_recorded_guest_without_nmi_fails_an_nmi_request() -> None:
    facts = parse_facts(recorded("arm64-facts-1cpu-nmi-off.txt"))
    (problem,) = check_facts(replace(ARM64_1CPU_IRQ, nmi=True), facts)
    assert problem.startswith("pseudo-NMI was requested but the guest did not enable it")


def test_recorded_guest_with_nmi_fails_an_irq_request() -> None:
    facts = parse_facts(recorded("arm64-facts-2s2cl1c2t.txt"))
    assert check_facts(ARM64_IRQ, facts) == ["NMI mode is off but the guest enabled pseudo-NMI"]


def test_recorded_8cpu_guest_fails_a_4cpu_request() -> None:
    facts = parse_facts(recorded("arm64-facts-2s2cl1c2t.txt"))
    problems = check_facts(replace(ARM64_NMI, topology=CpuTopology(2, 1, 1, 2)), facts)
    assert problems == ["8 CPUs online, asked for 4", "guest has 8 CPUs in sysfs, asked for 4"]


def test_recorded_guest_with_other_layout_of_8_cpus_names_the_levels() -> None:
    facts = parse_facts(recorded("arm64-facts-2s2cl1c2t.txt"))
    # Asked 1 socket of 2 clusters of 2 cores; the guest has 2 sockets of 2 clusters of 1 core.
    problems = check_facts(replace(ARM64_NMI, topology=CpuTopology(1, 2, 2, 2)), facts)
    assert [p.split(":")[0] for p in problems] == ["sockets", "clusters"]


def test_the_pmu_line_of_linux_612_is_read_too() -> None:
    """6.12's arm_pmu prints the counter mask after the count (drivers/perf/arm_pmu.c)."""
    line = ("[    1.390450] hw perfevents: enabled with armv8_pmuv3 PMU driver, "
            "7 (0,8000003f) counters available, using NMIs")  # fmt: skip
    facts = parse_facts(arm64_output().replace(PMU_LINE + ", using NMIs", line))
    assert (facts.pmu_driver, facts.pmu_counters, facts.pmu_uses_nmi) == ("armv8_pmuv3", 7, True)


STRICT = "[    0.000000] kcsan: strict mode configured"
NON_STRICT = (
    "[    0.000000] kcsan: non-strict mode configured - use CONFIG_KCSAN_STRICT=y to see all "
    "data races"
)


def with_dmesg_line(line: str) -> str:
    return arm64_output().replace("### topology", f"{line}\n### topology")


def test_kcsan_mode_is_read_from_the_boot_line() -> None:
    assert parse_facts(with_dmesg_line(STRICT)).kcsan_mode == "strict"
    assert parse_facts(with_dmesg_line(NON_STRICT)).kcsan_mode == "non-strict"
    assert parse_facts(arm64_output()).kcsan_mode is None


def test_the_kcsan_variant_must_boot_strict() -> None:
    assert check_variant_facts("kcsan", parse_facts(with_dmesg_line(STRICT))) == []
    (non_strict,) = check_variant_facts("kcsan", parse_facts(with_dmesg_line(NON_STRICT)))
    assert "booted with non-strict mode" in non_strict
    (missing,) = check_variant_facts("kcsan", parse_facts(arm64_output()))
    assert "no KCSAN mode line" in missing
    assert check_variant_facts("default", parse_facts(arm64_output())) == []
