from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness import arches
from harness.builder.images import BootFiles
from harness.errors import ConfigError
from harness.vm.argv import MachineSpec, build_argv, parse_usernet_ssh_port
from harness.vm.topology import CpuTopology, default_topology
from tests.unit.golden import LOGS_DIR, check_golden

ARM64 = arches.get("arm64")
X86_64 = arches.get("x86_64")
FILES = BootFiles(kernel=Path("/images/Image"), initrd=Path("/images/rootfs.cpio.gz"))
CONSOLE = Path("/work/console.log")
ARM64_SPEC = MachineSpec(arch=ARM64, topology=default_topology(8))
X86_SPEC = MachineSpec(arch=X86_64, topology=CpuTopology(sockets=2, cores=2, threads=2))


def argv_of(spec: MachineSpec, console: Path = CONSOLE) -> tuple[str, ...]:
    return build_argv(spec, FILES, qmp_fd=5, console_log=console)


def value_of(argv: tuple[str, ...], option: str) -> str:
    """The token after the only occurrence of ``option``."""
    assert argv.count(option) == 1, f"{option} appears {argv.count(option)} times"
    return argv[argv.index(option) + 1]


# --- MachineSpec validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"arch": ARM64, "topology": CpuTopology(cores=513)}, "513 CPUs is more than"),
        ({"arch": X86_64, "topology": CpuTopology(cores=289)}, "289 CPUs is more than"),
        ({"arch": X86_64, "topology": CpuTopology(clusters=2)}, "cannot have clusters"),
        ({"arch": X86_64, "topology": CpuTopology(), "nmi": False}, "NMIs always"),
        ({"arch": ARM64, "topology": CpuTopology(), "memory_mib": 127}, "too small"),
        (
            {"arch": ARM64, "topology": CpuTopology(), "accel": "kvm", "icount_shift": 3},
            "-icount needs TCG",
        ),
    ],
)
def test_machine_spec_rejects(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        MachineSpec(**fields)  # type: ignore[arg-type]


def test_machine_spec_accepts_the_limits() -> None:
    spec = MachineSpec(arch=ARM64, topology=CpuTopology(cores=512), memory_mib=128, nmi=False)
    assert (spec.topology.cpus, spec.name) == (512, "arm64-tcg-1s1cl512c1t-irq")


# --- build_argv -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [ARM64_SPEC, X86_SPEC], ids=["arm64", "x86_64"])
def test_every_token_is_a_single_token(spec: MachineSpec) -> None:
    argv = argv_of(spec)
    glued = [t for t in argv if " -" in t or (t.startswith("-") and " " in t)]
    assert glued == []


def test_smp_includes_clusters_on_arm64() -> None:
    assert value_of(argv_of(ARM64_SPEC), "-smp") == "8,sockets=2,clusters=2,cores=1,threads=2"


def test_smp_omits_clusters_on_x86_64() -> None:
    assert value_of(argv_of(X86_SPEC), "-smp") == "8,sockets=2,cores=2,threads=2"


@pytest.mark.parametrize(("nmi", "flag"), [(True, "=1"), (False, "=0")])
def test_append_switches_pseudo_nmi_on_arm64(nmi: bool, flag: str) -> None:
    words = value_of(argv_of(replace(ARM64_SPEC, nmi=nmi)), "-append").split()
    assert [w for w in words if "pseudo_nmi" in w] == [f"irqchip.gicv3_pseudo_nmi{flag}"]


def test_append_has_no_pseudo_nmi_on_x86_64() -> None:
    append = value_of(argv_of(X86_SPEC), "-append")
    assert ("pseudo_nmi" in append, "console=ttyS0" in append.split()) == (False, True)


def test_kernel_args_are_appended() -> None:
    spec = replace(ARM64_SPEC, kernel_args=("nokaslr", "loglevel=8"))
    assert value_of(argv_of(spec), "-append").split()[-2:] == ["nokaslr", "loglevel=8"]


def test_ssh_is_forwarded_from_a_free_loopback_port() -> None:
    netdev = value_of(argv_of(ARM64_SPEC), "-netdev")
    assert "hostfwd=tcp:127.0.0.1:0-:22" in netdev.split(",")


def test_console_path_with_a_comma_is_escaped() -> None:
    argv = argv_of(ARM64_SPEC, console=Path("/tmp/run,1/console.log"))
    chardevs = [argv[i + 1] for i, t in enumerate(argv) if t == "-chardev"]
    assert "file,id=con0,path=/tmp/run,,1/console.log" in chardevs


@pytest.mark.parametrize(
    ("accel", "threads", "expected"),
    [
        ("tcg", "multi", "tcg,thread=multi"),
        ("tcg", "single", "tcg,thread=single"),
        ("kvm", "multi", "kvm"),
    ],
)
def test_accel_option(accel: str, threads: str, expected: str) -> None:
    spec = replace(ARM64_SPEC, accel=accel, tcg_threads=threads)  # type: ignore[arg-type]
    argv = argv_of(spec)
    assert (value_of(argv, "-accel"), value_of(argv, "-cpu")) == (
        expected,
        "host,pmu=on" if accel == "kvm" else "max,pmu=on",
    )


def test_icount_only_when_set() -> None:
    assert "-icount" not in argv_of(ARM64_SPEC)
    assert value_of(argv_of(replace(ARM64_SPEC, icount_shift=4)), "-icount") == "shift=4"


def test_qemu_binary_override() -> None:
    argv = build_argv(ARM64_SPEC, FILES, qmp_fd=5, console_log=CONSOLE, qemu_binary="/opt/q")
    assert argv[0] == "/opt/q"


def test_full_argv_for_arm64_8_cpus_matches_golden() -> None:
    check_golden("argv-arm64-2s2cl1c2t.txt", "\n".join(argv_of(ARM64_SPEC)) + "\n")


# --- info usernet ---------------------------------------------------------------------------

INFO_USERNET = (LOGS_DIR / "info-usernet.txt").read_bytes().decode()  # keep the \r\n


def test_usernet_port_from_real_qemu_7_2_output() -> None:
    assert parse_usernet_ssh_port(INFO_USERNET) == 10022


def test_usernet_port_none_without_host_forward() -> None:
    without = "\r\n".join(ln for ln in INFO_USERNET.split("\r\n") if "HOST_FORWARD" not in ln)
    assert parse_usernet_ssh_port(without) is None


def test_usernet_port_none_when_forward_is_not_to_ssh() -> None:
    other = INFO_USERNET.replace("10.0.2.15    22     0     0", "10.0.2.15    80     0     0")
    assert other != INFO_USERNET
    assert parse_usernet_ssh_port(other) is None
