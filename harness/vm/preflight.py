"""What a booted guest really has: PMU, NMI delivery, CPUs, topology (parsing is pure).

One SSH round trip collects everything (`FACTS_COMMAND`); `parse_facts` reads
it and `check_facts` compares it with the machine spec, so a guest without the
PMU or pseudo-NMI it was meant to have fails as an environment problem, never
as "0 samples" later::

    facts = parse_facts(shell.run(FACTS_COMMAND).stdout)
    problems = check_facts(spec, facts)      # [] when the guest is as asked
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from harness.vm.argv import MachineSpec
from harness.vm.topology import CpuPlace, check_guest_topology, parse_cpu_list, parse_sysfs_topology

_SECTIONS = ("online", "release", "cmdline", "dmesg", "topology", "event_sources")
FACTS_COMMAND = "; ".join(
    f"echo '### {name}'; {command}"
    for name, command in zip(
        _SECTIONS,
        (
            "cat /sys/devices/system/cpu/online",
            "uname -r",
            "cat /proc/cmdline",
            "dmesg",
            "grep -H . /sys/devices/system/cpu/cpu*/topology/*",
            "ls /sys/bus/event_source/devices",
        ),
        strict=True,
    )
)

#: 6.1: "..., 7 counters available"; 6.12 adds the counter mask: "7 (0,8000003f) counters".
_ARM_PMU = re.compile(
    r"hw perfevents: enabled with (\S+) PMU driver, (\d+) (?:\([^)]*\) )?counters available(.*)"
)
_X86_PMU = re.compile(r"Performance Events: (.*?)(?:, )?(\w+) PMU driver")
_X86_COUNTERS = re.compile(r"\.\.\. generic registers:\s+(\d+)")
_SOFTWARE_ONLY = "using software events only"
_PSEUDO_NMI = "Pseudo-NMIs enabled"
#: KCSAN's boot line (kernel/kcsan/core.c): "kcsan: strict mode configured" or
#: "kcsan: non-strict mode configured - use CONFIG_KCSAN_STRICT=y to see all data races".
_KCSAN_MODE = re.compile(r"kcsan: (?P<mode>(?:non-)?strict) mode configured")
#: The KCSAN mode each variant's guest must boot in (None: no KCSAN). Strict follows the
#: LKMM: only there is a plain store of a published index watched at all.
VARIANT_KCSAN_MODE: dict[str, str | None] = {"default": None, "debug": None, "kcsan": "strict"}


@dataclass(frozen=True, slots=True)
class GuestFacts:
    """Facts read from a booted guest."""

    cpus_online: int
    kernel_release: str
    cmdline: str
    pmu_driver: str | None  # e.g. 'armv8_pmuv3', 'Intel'; None: no hardware PMU
    pmu_counters: int
    pmu_uses_nmi: bool  # overflow interrupts arrive as NMIs
    pseudo_nmi: bool  # arm64 GICv3 pseudo-NMI enabled
    software_events_only: bool  # the kernel said so (x86 under TCG)
    places: tuple[CpuPlace, ...]
    kcsan_mode: str | None = None  # "strict", "non-strict", None: KCSAN printed no mode

    def as_record(self) -> dict[str, object]:
        """JSON-ready form for run.json (topology places summarised)."""
        record = asdict(self)
        record["places"] = [
            {"cpu": p.cpu, "socket": p.socket, "cluster": p.cluster, "core": p.core,
             "threads": sorted(p.thread_siblings)}
            for p in self.places
        ]  # fmt: skip
        return record


def split_sections(text: str) -> dict[str, str]:
    """Split `FACTS_COMMAND` output into its named sections."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("### ") and line[4:].strip() in _SECTIONS:
            current = sections.setdefault(line[4:].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def parse_facts(text: str) -> GuestFacts:
    """Read `FACTS_COMMAND` output into `GuestFacts`."""
    sections = split_sections(text)
    dmesg = sections.get("dmesg", "")
    driver, counters, uses_nmi = None, 0, False
    if arm := _ARM_PMU.search(dmesg):
        driver, counters, uses_nmi = arm[1], int(arm[2]), "using NMIs" in arm[3]
    elif (x86 := _X86_PMU.search(dmesg)) and _SOFTWARE_ONLY not in dmesg:
        driver, uses_nmi = x86[2], True  # x86 PMU interrupts are NMIs
        found = _X86_COUNTERS.search(dmesg)
        counters = int(found[1]) if found else 0
    return GuestFacts(
        cpus_online=len(parse_cpu_list(sections.get("online", ""))),
        kernel_release=sections.get("release", "").strip(),
        cmdline=sections.get("cmdline", "").strip(),
        pmu_driver=driver,
        pmu_counters=counters,
        pmu_uses_nmi=uses_nmi,
        pseudo_nmi=_PSEUDO_NMI in dmesg,
        software_events_only=_SOFTWARE_ONLY in dmesg,
        places=parse_sysfs_topology(sections.get("topology", "")),
        kcsan_mode=kcsan["mode"] if (kcsan := _KCSAN_MODE.search(dmesg)) else None,
    )


def check_facts(spec: MachineSpec, facts: GuestFacts) -> list[str]:
    """Differences between what ``spec`` asked for and what the guest has."""
    problems = []
    if facts.cpus_online != spec.topology.cpus:
        problems.append(f"{facts.cpus_online} CPUs online, asked for {spec.topology.cpus}")
    problems += check_guest_topology(spec.topology, facts.places)
    if spec.arch.has_pmu(spec.accel):
        if facts.pmu_driver is None or facts.pmu_counters == 0:
            problems.append(
                "no hardware PMU driver registered (expected one: "
                f"{spec.arch.name} on {spec.accel}); check the kernel's PMU options"
            )
        if spec.arch.pseudo_nmi_arg is not None:
            if spec.nmi and not (facts.pseudo_nmi and facts.pmu_uses_nmi):
                problems.append(
                    "pseudo-NMI was requested but the guest did not enable it "
                    f"(pseudo-NMI: {facts.pseudo_nmi}, PMU using NMIs: {facts.pmu_uses_nmi})"
                )
            if not spec.nmi and (facts.pseudo_nmi or facts.pmu_uses_nmi):
                problems.append("NMI mode is off but the guest enabled pseudo-NMI")
    return problems


def check_variant_facts(variant: str, facts: GuestFacts) -> list[str]:
    """Differences between the kernel ``variant`` (e.g. "kcsan") promises and the guest's boot.

    The kcsan variant must have booted KCSAN in strict mode (`VARIANT_KCSAN_MODE`): a
    non-strict kernel never watches a plain aligned write, so it could not see the class
    of race its runs are for.
    """
    want = VARIANT_KCSAN_MODE.get(variant)
    if want is None or facts.kcsan_mode == want:
        return []
    seen = f"{facts.kcsan_mode} mode" if facts.kcsan_mode else "no KCSAN mode line"
    return [f"the {variant} kernel booted with {seen}; expected 'kcsan: {want} mode "
            "configured' (guest/kconfig/kcsan.config: CONFIG_KCSAN_STRICT=y)"]  # fmt: skip
