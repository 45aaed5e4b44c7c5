"""Per-architecture facts, kept as data.

Code elsewhere asks an `ArchProfile` (``profile.pmu_requires_kvm``,
``profile.pseudo_nmi_arg``); it never compares architecture names. Adding an
architecture means adding one entry to `ARCHES`::

    profile = arches.get("arm64")
    profile.qemu_binary          # 'qemu-system-aarch64'
    profile.cpu_model("tcg")     # 'max,pmu=on'
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass
from typing import Literal

from harness.errors import ConfigError

Accel = Literal["kvm", "tcg"]
ACCELS: tuple[Accel, ...] = ("kvm", "tcg")


@dataclass(frozen=True, slots=True)
class ArchProfile:
    """What the bench needs to know to build, boot and judge one architecture."""

    name: str  # our name: --arch, cache keys, images/<name>
    debian_arch: str  # dpkg architecture of the guest's packages
    linux_arch: str  # ARCH= for the kernel build
    cross_compile: str  # CROSS_COMPILE= prefix
    cross_package: str  # Debian package that provides the compiler
    static_libc: str  # libc.a for static guest tools (profctl)
    static_libc_package: str  # Debian package that provides static_libc
    qemu_binary: str
    qemu_package: str  # Debian package that provides qemu_binary
    machine: str  # -machine value, without accel
    tcg_cpu: str
    kvm_cpu: str
    max_cpus: int  # the machine type's limit, as QEMU enforces it
    supports_clusters: bool  # -smp clusters= is accepted and reaches the guest
    kernel_image: str  # relative to the kernel build dir
    console: str  # console= device
    kconfig_dir: str  # guest/kconfig/<dir>/{arch,pmu-nmi}.config
    pmu_requires_kvm: bool  # TCG does not emulate this PMU
    pseudo_nmi_arg: str | None  # kernel argument that turns NMI delivery on/off
    qmp_inject_nmi: bool  # QMP inject-nmi works on this machine
    kvm_host_machines: tuple[str, ...]  # platform.machine() values that can run it under KVM
    pmu_interrupt_label: str  # how /proc/interrupts names the PMU overflow interrupt
    tcg_cycles_per_ns: float | None  # TCG's cycle counter rate (QEMU arm: 1 GHz virtual)
    probe_kernel: bytes  # a -kernel image that writes "KV" to the serial port and halts

    def cpu_model(self, accel: Accel) -> str:
        """The -cpu value for ``accel``."""
        return self.kvm_cpu if accel == "kvm" else self.tcg_cpu

    def cycles_per_ns(self, accel: Accel) -> float | None:
        """Cycles the PMU counts per guest nanosecond, where that is a fixed rate."""
        return self.tcg_cycles_per_ns if accel == "tcg" else None

    def has_pmu(self, accel: Accel) -> bool:
        """Whether a guest on ``accel`` gets a hardware PMU."""
        return accel == "kvm" or not self.pmu_requires_kvm

    @property
    def kvm_possible_here(self) -> bool:
        """Whether this host's CPU could run the arch under KVM at all."""
        return platform.machine() in self.kvm_host_machines


def _multiboot_probe() -> bytes:
    """x86: a multiboot (a.out kludge) image loaded at 1 MiB, 32-bit code."""
    magic, flags, base = 0x1BADB002, 0x00010000, 0x100000
    header = struct.pack("<8I", magic, flags, -(magic + flags) & 0xFFFFFFFF, base, base, 0, 0,
                         base + 32)  # fmt: skip
    # mov edx,0x3f8; mov al,'K'; out dx,al; mov al,'V'; out dx,al; cli; hlt; jmp hlt
    return header + bytes.fromhex("baf8030000b04beeb056eefaf4ebfd")


def _arm64_image_probe() -> bytes:
    """arm64: a Linux ``Image`` (64-byte header) storing to the virt PL011 at 0x09000000."""
    code = (
        0xD2A12001,  # movz x1, #0x0900, lsl #16
        0x52800960,  # mov  w0, #'K'
        0x39000020,  # strb w0, [x1]
        0x52800AC0,  # mov  w0, #'V'
        0x39000020,  # strb w0, [x1]
        0xD503207F,  # wfi
        0x17FFFFFF,  # b    wfi
    )
    body = struct.pack(f"<{len(code)}I", *code)
    # b +64 (past the header); image size; "ARM\x64" magic at offset 56
    header = struct.pack("<IIQQQQQQII", 0x14000010, 0, 0, 64 + len(body), 0, 0, 0, 0,
                         0x644D5241, 0)  # fmt: skip
    return header + body


ARCHES: dict[str, ArchProfile] = {
    profile.name: profile
    for profile in (
        ArchProfile(
            name="arm64",
            debian_arch="arm64",
            linux_arch="arm64",
            cross_compile="aarch64-linux-gnu-",
            cross_package="gcc-aarch64-linux-gnu",
            static_libc="/usr/aarch64-linux-gnu/lib/libc.a",
            static_libc_package="libc6-dev-arm64-cross",
            qemu_binary="qemu-system-aarch64",
            qemu_package="qemu-system-arm",
            # GICv3 is what makes pseudo-NMI possible; its redistributor limit is 512.
            machine="virt,gic-version=3",
            tcg_cpu="max,pmu=on",
            kvm_cpu="host,pmu=on",
            max_cpus=512,
            supports_clusters=True,
            kernel_image="arch/arm64/boot/Image",
            console="ttyAMA0",
            kconfig_dir="arm64",
            pmu_requires_kvm=False,
            pseudo_nmi_arg="irqchip.gicv3_pseudo_nmi",
            qmp_inject_nmi=False,  # QEMU 7.2: "not currently supported" on virt
            kvm_host_machines=("aarch64", "arm64"),
            pmu_interrupt_label="arm-pmu",
            tcg_cycles_per_ns=1.0,  # target/arm: ARM_CPU_FREQ, from the virtual clock
            probe_kernel=_arm64_image_probe(),
        ),
        ArchProfile(
            name="x86_64",
            debian_arch="amd64",
            linux_arch="x86_64",
            cross_compile="x86_64-linux-gnu-",
            cross_package="gcc",  # native on the amd64 hosts that can run it under KVM
            static_libc="/usr/lib/x86_64-linux-gnu/libc.a",
            static_libc_package="libc6-dev",
            qemu_binary="qemu-system-x86_64",
            qemu_package="qemu-system-x86",
            machine="q35",
            tcg_cpu="max",
            kvm_cpu="host,pmu=on",
            max_cpus=288,
            supports_clusters=False,
            kernel_image="arch/x86/boot/bzImage",
            console="ttyS0",
            kconfig_dir="x86_64",
            pmu_requires_kvm=True,  # "PMU not available due to virtualization" under TCG
            pseudo_nmi_arg=None,  # PMU overflows are always NMIs on x86
            qmp_inject_nmi=True,
            kvm_host_machines=("x86_64", "amd64"),
            pmu_interrupt_label="Performance monitoring interrupts",
            tcg_cycles_per_ns=None,  # no PMU under TCG
            probe_kernel=_multiboot_probe(),
        ),
    )
}

DEFAULT_ARCH = "arm64"


def get(name: str) -> ArchProfile:
    """Return the profile called ``name``.

    :raise ConfigError: unknown name; the message lists the known ones.
    """
    try:
        return ARCHES[name]
    except KeyError:
        known = ", ".join(sorted(ARCHES))
        raise ConfigError(f"unknown arch {name!r}; use one of: {known}") from None
