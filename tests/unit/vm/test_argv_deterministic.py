"""The QEMU options of deterministic runs: deterministic, record, replay, gdb (harness.vm.argv)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness import arches
from harness.builder.images import BootFiles
from harness.errors import ConfigError
from harness.vm.argv import DeterministicRun, MachineSpec, build_argv
from harness.vm.topology import CpuTopology, default_topology

ARM64 = arches.get("arm64")
FILES = BootFiles(kernel=Path("/images/Image"), initrd=Path("/b/guest/initrd.cpio"))
ONE = MachineSpec(arch=ARM64, topology=CpuTopology())
EIGHT = MachineSpec(arch=ARM64, topology=default_topology(8))
RR = Path("/b/attempt-1/rr.bin")


def argv_of(spec: MachineSpec) -> tuple[str, ...]:
    return build_argv(spec, FILES, qmp_fd=5, console_log=Path("/b/attempt-1/console.log"))


def values_of(argv: tuple[str, ...], option: str) -> list[str]:
    return [argv[i + 1] for i, token in enumerate(argv) if token == option]


def test_deterministic_is_single_threaded_icount_seeded_clocked_and_offline() -> None:
    argv = argv_of(replace(EIGHT, deterministic=DeterministicRun(kind="deterministic", seed=7)))
    assert values_of(argv, "-accel") == ["tcg,thread=single"]
    assert values_of(argv, "-icount") == ["shift=0,sleep=off"]
    assert values_of(argv, "-seed") == ["7"]
    assert values_of(argv, "-rtc") == ["base=2024-01-01T00:00:00,clock=vm"]
    assert "-netdev" not in argv
    assert not any("virtio-net" in token for token in argv)
    assert "-S" in argv  # started by QMP cont after the handshake
    assert "-gdb" not in argv


def test_an_ordinary_run_keeps_its_network_and_threads() -> None:
    argv = argv_of(EIGHT)
    assert values_of(argv, "-accel") == ["tcg,thread=multi"]
    assert "-netdev" in argv
    assert not {"-S", "-seed", "-rtc", "-gdb"} & set(argv)


def test_record_and_replay_name_the_rr_file() -> None:
    record = argv_of(
        replace(ONE, deterministic=DeterministicRun(kind="record", seed=1, rr_file=RR))
    )
    replay = argv_of(
        replace(ONE, deterministic=DeterministicRun(kind="replay", seed=1, rr_file=RR))
    )
    assert values_of(record, "-icount") == [f"shift=0,sleep=off,rr=record,rrfile={RR}"]
    assert values_of(replay, "-icount") == [f"shift=0,sleep=off,rr=replay,rrfile={RR}"]


def test_rr_file_commas_are_escaped() -> None:
    run = DeterministicRun(kind="record", seed=1, rr_file=Path("/a,b/rr.bin"))
    assert values_of(argv_of(replace(ONE, deterministic=run)), "-icount")[0].endswith(
        "/a,,b/rr.bin"
    )


def test_gdb_replay_opens_the_stub_and_an_orphan_snapshot_drive() -> None:
    run = DeterministicRun(kind="replay", seed=1, rr_file=RR, gdb_port=4321,
                           snapshots=Path("/r/snapshots.qcow2"))  # fmt: skip
    argv = argv_of(replace(ONE, deterministic=run))
    assert values_of(argv, "-gdb") == ["tcp:127.0.0.1:4321"]
    assert values_of(argv, "-drive") == ["file=/r/snapshots.qcow2,if=none,id=rrsnap"]
    assert not any(token.startswith("virtio-blk") for token in argv)  # no device sees it


def test_a_witnessed_run_opens_the_stub_from_the_start_and_nothing_else() -> None:
    """gdb attaches before the guest runs; the argv is the unwitnessed one plus ``-gdb``."""
    plain = DeterministicRun(kind="deterministic", seed=1)
    witnessed = argv_of(replace(EIGHT, deterministic=replace(plain, witness_port=4321)))
    assert values_of(witnessed, "-gdb") == ["tcp:127.0.0.1:4321"]
    assert "-S" in witnessed  # gdb's continue starts the guest
    assert "-drive" not in witnessed  # no snapshot file: nothing seeks backwards
    without = [t for t in witnessed if t not in ("-gdb", "tcp:127.0.0.1:4321")]
    assert without == list(argv_of(replace(EIGHT, deterministic=plain)))


def test_record_refuses_more_than_one_vcpu_naming_qemus_limit() -> None:
    with pytest.raises(ConfigError, match=r"QEMU 7\.2 refuses -icount rr= with -smp > 1"):
        replace(EIGHT, deterministic=DeterministicRun(kind="record", seed=1, rr_file=RR))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "deterministic", "rr_file": RR}, "needs an rr file exactly when"),
        ({"kind": "record"}, "needs an rr file exactly when"),
        ({"kind": "deterministic", "gdb_port": 1234}, "--gdb attaches to a replay only"),
        ({"kind": "record", "rr_file": RR, "snapshots": Path("/s")}, "replay only"),
        ({"kind": "record", "rr_file": RR, "witness_port": 1234}, "--deterministic runs only"),
        ({"kind": "replay", "rr_file": RR, "witness_port": 1234}, "--deterministic runs only"),
    ],
)
def test_deterministic_run_refuses_inconsistent_kinds(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        DeterministicRun(seed=1, **fields)  # type: ignore[arg-type]


def test_deterministic_run_refuses_kvm_and_a_second_icount() -> None:
    run = DeterministicRun(kind="deterministic", seed=1)
    with pytest.raises(ConfigError, match="needs TCG"):
        replace(ONE, accel="kvm", deterministic=run)
    with pytest.raises(ConfigError, match="sets -icount itself"):
        replace(ONE, icount_shift=0, deterministic=run)
