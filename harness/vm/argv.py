"""A machine spec and the QEMU command line it becomes (pure: no I/O).

Argv is a tuple of single tokens, never a shell string; commas inside option
values are doubled as QEMU requires::

    spec = MachineSpec(arch=arches.get("arm64"), topology=default_topology(8))
    argv = build_argv(spec, BootFiles(kernel, initrd), qmp_fd=5, console_log=Path("con.log"))
    shlex.join(argv)   # for logs and run.json

The SSH port is not chosen here: the guest's port 22 is forwarded from
``127.0.0.1:0``, and QEMU picks a free port, read back over QMP afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.arches import Accel, ArchProfile
from harness.builder.images import BootFiles
from harness.errors import ConfigError
from harness.vm.topology import CpuTopology

TcgThreads = Literal["multi", "single"]
DeterministicKind = Literal["deterministic", "record", "replay"]
GUEST_SSH_PORT = 22
MIN_MEMORY_MIB = 128
#: The guest's wall clock at boot in a deterministic run (``-rtc base=...,clock=vm``).
FIXED_RTC_BASE = "2024-01-01T00:00:00"
#: QEMU 7.2 refuses record/replay with more than one vCPU.
RR_MAX_CPUS = 1


@dataclass(frozen=True, slots=True)
class DeterministicRun:
    """An input-free run whose every instruction is fixed: deterministic, recorded or replayed.

    All three run one TCG thread under ``-icount shift=0,sleep=off`` with a fixed
    ``-seed`` and a virtual-time RTC, and attach no network (slirp would bring host
    time and host packets in); the guest writes its results to the console. The guest
    starts stopped (``-S``) until QMP ``cont``.
    ``record``/``replay`` add ``rr=...,rrfile=``; ``gdb_port`` opens QEMU's gdbstub there
    for a person's gdb (and gdb's ``continue`` starts the guest). ``witness_port`` opens
    it for the witness (`harness.vm.witness`) in a deterministic run, whose gdb starts
    the guest the same way.
    """

    kind: DeterministicKind
    seed: int
    rr_file: Path | None = None
    rtc_base: str = FIXED_RTC_BASE
    gdb_port: int | None = None
    #: A qcow2 file for the replay's snapshots (reverse debugging seeks from one).
    snapshots: Path | None = None
    witness_port: int | None = None

    def __post_init__(self) -> None:
        if (self.kind == "deterministic") != (self.rr_file is None):
            raise ConfigError(f"a deterministic run of kind {self.kind!r} needs an rr file "
                              "exactly when it records or replays")  # fmt: skip
        if (self.gdb_port is not None or self.snapshots is not None) and self.kind != "replay":
            raise ConfigError("--gdb attaches to a replay only (--bundle DIR --replay --gdb)")
        if self.witness_port is not None and (self.kind != "deterministic" or self.gdb_port):
            raise ConfigError("the witness watches --deterministic runs only, without --gdb")


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """Everything that decides how a guest is started."""

    arch: ArchProfile
    topology: CpuTopology
    accel: Accel = "tcg"
    memory_mib: int = 1024
    nmi: bool = True  # pseudo-NMI on arm64; x86 PMU interrupts are always NMIs
    kernel_args: tuple[str, ...] = ()
    tcg_threads: TcgThreads = "multi"
    icount_shift: int | None = None  # -icount shift=N: instruction counting, one TCG thread
    deterministic: DeterministicRun | None = None  # input-free, instruction for instruction

    def __post_init__(self) -> None:
        if self.topology.cpus > self.arch.max_cpus:
            raise ConfigError(
                f"{self.topology.cpus} CPUs is more than the {self.arch.name} machine "
                f"{self.arch.machine!r} allows ({self.arch.max_cpus}); ask for fewer"
            )
        if self.topology.clusters > 1 and not self.arch.supports_clusters:
            raise ConfigError(
                f"{self.arch.name} guests cannot have clusters (topology "
                f"{self.topology.name}); use clusters=1"
            )
        if not self.nmi and self.arch.pseudo_nmi_arg is None:
            raise ConfigError(
                f"{self.arch.name} delivers PMU interrupts as NMIs always; NMI mode 'off' "
                "exists only where the arch has a switch (arm64 pseudo-NMI)"
            )
        if self.memory_mib < MIN_MEMORY_MIB:
            raise ConfigError(f"memory_mib={self.memory_mib} is too small; use ≥ {MIN_MEMORY_MIB}")
        if self.icount_shift is not None and self.accel != "tcg":
            raise ConfigError("-icount needs TCG; drop --deterministic or use --accel tcg")
        self._check_deterministic()

    def _check_deterministic(self) -> None:
        if self.deterministic is None:
            return
        if self.accel != "tcg" or self.icount_shift is not None:
            raise ConfigError("a deterministic run (--deterministic, --record, --replay) needs TCG "
                              "and sets -icount itself")  # fmt: skip
        if self.deterministic.kind != "deterministic" and self.topology.cpus > RR_MAX_CPUS:
            raise ConfigError(
                f"record/replay needs a 1-vCPU guest: QEMU 7.2 refuses -icount rr= with "
                f"-smp > {RR_MAX_CPUS}, and this one has {self.topology.cpus} CPUs "
                f"({self.topology.name}); use --deterministic for multi-vCPU guests"
            )

    @property
    def name(self) -> str:
        """Short id for logs and directories: ``arm64-tcg-2s2cl1c2t-nmi``."""
        nmi = "nmi" if self.nmi else "irq"
        return f"{self.arch.name}-{self.accel}-{self.topology.name}-{nmi}"


def kernel_cmdline(spec: MachineSpec) -> str:
    """The guest kernel's command line."""
    # random.trust_cpu=on: seed the CRNG from the CPU's RNG (RNDR/RDRAND of -cpu max/host)
    # at boot. Without it dropbear blocks in getrandom() until "crng init done", about
    # 1.5 s later under TCG; a throwaway test guest needs no stronger entropy.
    args = [f"console={spec.arch.console}", "rdinit=/init", "panic=-1", "random.trust_cpu=on"]
    if spec.accel == "tcg":
        # The soft-lockup (2 x 10 s) and RCU stall (21 s) detectors time a CPU in wall
        # seconds. Under TCG on a shared two-core host a vCPU can run slowly that long
        # with nothing wrong in the guest: seen during a debug-kernel boot (tracefs init,
        # "CPU#1 stuck for 28s") and in a debug guest beside a 40-vCPU one. A likely cause is
        # QEMU's own: ICC_PMR_EL1 is ARM_CP_IO (hw/intc/arm_gicv3_cpuif.c), so with
        # pseudo-NMI every local_irq_save/restore of the guest takes QEMU's global lock,
        # and 8 debug-kernel vCPUs on 2 host cores queue on it: idle vCPUs took neither an
        # IPI nor their own timer for 26 s in two 10 000-cycle KP-D2 runs. About six times
        # the defaults keeps a real hang visible within two minutes (three for a work item:
        # the workqueue watchdog's 30 s passed with a pool "stuck for 41s" in hwpmc's
        # standard run on the 8-vCPU debug kernel beside another such guest, 6.1).
        args += ["watchdog_thresh=60", "rcupdate.rcu_cpu_stall_timeout=120",
                 "workqueue.watchdog_thresh=180"]  # fmt: skip
    if spec.arch.pseudo_nmi_arg is not None:
        args.append(f"{spec.arch.pseudo_nmi_arg}={1 if spec.nmi else 0}")
    return " ".join((*args, *spec.kernel_args))


def build_argv(
    spec: MachineSpec,
    files: BootFiles,
    *,
    qmp_fd: int,
    console_log: Path,
    qemu_binary: str | None = None,
) -> tuple[str, ...]:
    """The complete QEMU command line for ``spec``.

    ``panic=-1`` with ``-no-reboot`` makes a panicking guest exit QEMU at once,
    after the panic lines reached the console file.
    """
    topo = spec.topology
    smp = topo.smp_value if spec.arch.supports_clusters else topo.smp_value_without_clusters
    threads = "single" if spec.deterministic is not None else spec.tcg_threads
    accel = "kvm" if spec.accel == "kvm" else f"tcg,thread={threads}"
    network = (
        ()
        if spec.deterministic is not None  # no slirp: host time and packets would enter the guest
        else ("-netdev", f"user,id=net0,hostfwd=tcp:127.0.0.1:0-:{GUEST_SSH_PORT}",
              "-device", "virtio-net-pci,netdev=net0,romfile=")
    )  # fmt: skip
    argv = [
        qemu_binary or spec.arch.qemu_binary,
        "-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
        "-machine", spec.arch.machine,
        "-accel", accel,
        "-cpu", spec.arch.cpu_model(spec.accel),
        "-smp", smp,
        "-m", f"{spec.memory_mib}M",
        "-kernel", str(files.kernel),
        "-initrd", str(files.initrd),
        "-append", kernel_cmdline(spec),
        *network,
        "-chardev", f"file,id=con0,path={quote_optarg(str(console_log))}",
        "-serial", "chardev:con0",
        "-chardev", f"socket,id=qmp0,fd={qmp_fd}",
        "-mon", "chardev=qmp0,mode=control",
    ]  # fmt: skip
    if spec.icount_shift is not None:
        argv += ["-icount", f"shift={spec.icount_shift}"]
    if spec.deterministic is not None:
        argv += deterministic_argv(spec.deterministic)
    return tuple(argv)


def deterministic_argv(run: DeterministicRun) -> tuple[str, ...]:
    """The options `DeterministicRun` adds: icount (and rr), seed, RTC, gdbstub."""
    icount = "shift=0,sleep=off"
    if run.rr_file is not None:
        icount += f",rr={run.kind},rrfile={quote_optarg(str(run.rr_file))}"
    gdb: tuple[str, ...] = ()
    port = run.gdb_port if run.gdb_port is not None else run.witness_port
    if port is not None:
        gdb = ("-gdb", f"tcp:127.0.0.1:{port}")
    if run.snapshots is not None:  # an orphan node: no device sees it, savevm writes it
        gdb += ("-drive", f"file={quote_optarg(str(run.snapshots))},if=none,id=rrsnap")
    return (
        "-icount", icount,
        "-seed", str(run.seed),
        "-rtc", f"base={run.rtc_base},clock=vm",
        # Start stopped: QMP's handshake (host-timed) would otherwise kick a running vCPU
        # and shift the round-robin; the harness (or gdb) says `cont` once it is done.
        "-S",
        *gdb,
    )  # fmt: skip


def with_incoming(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` for a QEMU that waits for a saved state (``migrate-incoming``), not booting."""
    return (*argv, "-incoming", "defer")


def quote_optarg(value: str) -> str:
    """Escape a value for a QEMU ``key=value,...`` option (commas are doubled)."""
    return value.replace(",", ",,")


def parse_usernet_ssh_port(info_usernet: str) -> int | None:
    """Find the host port forwarded to the guest's SSH port in HMP ``info usernet``."""
    for line in info_usernet.splitlines():
        fields = line.split()
        # Protocol[State] FD SrcAddr SrcPort DstAddr DstPort RecvQ SendQ
        if (
            len(fields) >= 7
            and fields[0].startswith("TCP[HOST_FORWARD]")
            and fields[5] == str(GUEST_SSH_PORT)
            and re.fullmatch(r"\d+", fields[3])
        ):
            return int(fields[3])
    return None


#: slirp states of a TCP connection that is over (both sides closed).
_CLOSED_STATES = ("TIME_WAIT", "CLOSED")


def parse_usernet_connections(info_usernet: str) -> tuple[str, ...]:
    """TCP connections slirp holds open (``State addr:port`` each), from HMP ``info usernet``.

    Host forwards (listeners) and connections in TIME_WAIT or CLOSED are not listed.
    """
    found = []
    for line in info_usernet.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[0].startswith("TCP["):
            continue
        state = fields[0][4:].rstrip("]")
        if state != "HOST_FORWARD" and state not in _CLOSED_STATES:
            found.append(f"{state} {fields[2]}:{fields[3]}")
    return tuple(found)
