"""What a replay checks before it trusts a recording (harness.scenarios.deterministic_bundle)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from harness import arches
from harness.agent.module.build import AgentBuild
from harness.builder.cache import Cache, file_sha256
from harness.builder.images import BootFiles, GuestImages
from harness.errors import ConfigError
from harness.scenarios.deterministic import (
    DeterministicAttempt,
    DeterministicSetup,
    input_free_script,
    skipped_actions,
)
from harness.scenarios.deterministic_bundle import (
    EXTRA_CPIO,
    _check_identities,
    _manifest,
    argv_differences,
    replay_deterministic,
    repro_deterministic,
    run_deterministic,
)
from harness.scenarios.identity import NOT_DETERMINISTIC
from harness.scenarios.inputfree import GuestPlan
from harness.scenarios.load import find_scenario, load_scenario
from harness.scenarios.witnessing import witness_logs_identical
from harness.timeouts import Timeouts
from harness.vm.argv import DeterministicRun, MachineSpec, build_argv
from harness.vm.topology import CpuTopology

ONE = MachineSpec(arch=arches.get("arm64"), topology=CpuTopology())


def argv(run_dir: str, run: DeterministicRun, *, qmp_fd: int = 5) -> tuple[str, ...]:
    files = BootFiles(Path("/cache/Image"), Path(f"{run_dir}/../guest/initrd.cpio"))
    return build_argv(replace(ONE, deterministic=run), files, qmp_fd=qmp_fd,
                      console_log=Path(run_dir) / "console.log")  # fmt: skip


def test_a_replay_with_gdb_starts_qemu_as_the_recording_did() -> None:
    record = argv(
        "/b/attempt-1", DeterministicRun(kind="record", seed=3, rr_file=Path("/b/attempt-1/rr"))
    )
    replay = argv("/r/replay", DeterministicRun(kind="replay", seed=3,
                                                rr_file=Path("/b/attempt-1/rr"), gdb_port=999,
                                                snapshots=Path("/r/replay/s.qcow2")),
                  qmp_fd=7)  # fmt: skip
    assert argv_differences(record, replay, ("/b/attempt-1", "/r/replay")) == []


def test_a_replay_with_another_seed_or_machine_is_caught() -> None:
    record = argv("/b/a", DeterministicRun(kind="record", seed=3, rr_file=Path("/b/a/rr")))
    other_seed = argv("/r", DeterministicRun(kind="replay", seed=4, rr_file=Path("/b/a/rr")))
    assert argv_differences(record, other_seed, ("/b/a", "/r")) == ["'3' → '4'"]
    other_memory = build_argv(
        replace(ONE, memory_mib=2048,
                deterministic=DeterministicRun(kind="replay", seed=3, rr_file=Path("x"))),
        BootFiles(Path("/cache/Image"), Path("/r/guest/initrd.cpio")), qmp_fd=5,
        console_log=Path("/r/console.log"))  # fmt: skip
    assert argv_differences(record, other_memory, ("/b/a", "/r")) == ["'1024M' → '2048M'"]


def images(tmp_path: Path, kernel_sha: str, rootfs_sha: str) -> GuestImages:
    return GuestImages(arch=arches.get("arm64"), variant="default",
                       files=BootFiles(tmp_path / "Image", tmp_path / "rootfs.cpio"),
                       kernel_build=tmp_path, ssh_key=tmp_path / "key", kernel_key="k",
                       kernel_release="6.1", kernel_sha256=kernel_sha, config_sha256="c",
                       rootfs_key="r", rootfs_sha256=rootfs_sha)  # fmt: skip


def manifest(tmp_path: Path, extra_sha: str) -> dict[str, object]:
    return {"kernel": {"path": str(tmp_path / "Image"), "sha256": "K"},
            "rootfs": {"path": str(tmp_path / "rootfs.cpio"), "sha256": "R"},
            "extra_cpio": {"path": EXTRA_CPIO, "sha256": extra_sha}}  # fmt: skip


def test_identities_that_match_pass(tmp_path: Path) -> None:
    (tmp_path / "guest").mkdir()
    (tmp_path / EXTRA_CPIO).write_bytes(b"cpio")
    recorded = manifest(tmp_path, file_sha256(tmp_path / EXTRA_CPIO))
    _check_identities(tmp_path, recorded, images(tmp_path, "K", "R"))


@pytest.mark.parametrize(
    ("kernel", "rootfs", "extra", "message"),
    [
        ("K2", "R", b"cpio", "bundle's kernel was .* the tree builds"),
        ("K", "R2", b"cpio", "bundle's rootfs was"),
        ("K", "R", b"changed", "extra.cpio changed since the recording"),
    ],
)
def test_a_changed_identity_refuses_the_replay(
    tmp_path: Path, kernel: str, rootfs: str, extra: bytes, message: str
) -> None:
    (tmp_path / "guest").mkdir()
    (tmp_path / EXTRA_CPIO).write_bytes(b"cpio")
    recorded = manifest(tmp_path, file_sha256(tmp_path / EXTRA_CPIO))
    (tmp_path / EXTRA_CPIO).write_bytes(extra)
    with pytest.raises(ConfigError, match=message):
        _check_identities(tmp_path, recorded, images(tmp_path, kernel, rootfs))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bundle": False, "kind": "deterministic", "gdb": True}, "--gdb opens the gdbstub"),
        ({"bundle": False, "kind": "replay"}, "--replay takes a bundle"),
        ({"bundle": True, "kind": "record"}, "--replay takes a bundle"),
        ({"bundle": False, "kind": "record", "repeat": 2}, "--record makes one recording"),
    ],
)
def test_options_that_do_not_fit_are_refused(kwargs: dict[str, object], message: str,
                                             tmp_path: Path) -> None:  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        repro_deterministic("tprof-tp-d1-quirk", Cache(tmp_path), **kwargs)  # type: ignore[arg-type]


def test_recording_a_multi_vcpu_scenario_is_refused_before_building(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"QEMU 7\.2 refuses -icount rr="):
        repro_deterministic("dt-d1-fixed-4cpu", Cache(tmp_path), bundle=False, kind="record")
    assert not any(tmp_path.iterdir())  # nothing was built into the cache


def test_an_ordinary_bundle_is_not_replayed_deterministically(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no deterministic\.json"):
        replay_deterministic(tmp_path, Cache(tmp_path))


def test_the_manifest_holds_what_a_replay_needs(tmp_path: Path) -> None:
    (tmp_path / "guest").mkdir()
    (tmp_path / EXTRA_CPIO).write_bytes(b"cpio")
    ko = tmp_path / "profagent.ko"
    ko.write_bytes(b"ko")
    scenario = load_scenario(find_scenario("tprof-tp-d1-quirk"))
    setup = DeterministicSetup(scenario=scenario, spec=ONE, kernel=tmp_path / "Image",
                               vmlinux=tmp_path / "vmlinux", initrd=tmp_path / "initrd",
                               plan=GuestPlan(("cat x", "/tmp/profagent/profctl sleep:1")),
                               script=input_free_script(scenario),
                               build=cast(AgentBuild, SimpleNamespace(ko=ko)),
                               profctl=tmp_path / "profctl",
                               timeouts=Timeouts().scaled_by(3))  # fmt: skip
    done = [DeterministicAttempt(tmp_path / "attempt-1", (), {"samples": 16}, ("qemu", "-S"), 3.21,
                                 "0xffffffc000330000")]  # fmt: skip
    record = _manifest("record", scenario, ONE, images(tmp_path, "K", "R"), setup, done)
    assert (record["kind"], record["seed"], record["timeout_scale"]) == ("record", 1, 3.0)
    assert record["kernel"] == {"path": str(tmp_path / "Image"), "sha256": "K"}
    assert record["rootfs"] == {"path": str(tmp_path / "rootfs.cpio"), "sha256": "R"}
    assert record["extra_cpio"] == {
        "path": EXTRA_CPIO,
        "sha256": file_sha256(tmp_path / EXTRA_CPIO),
    }
    assert record["agent_ko_sha256"] == file_sha256(tmp_path / "profagent.ko")
    assert record["commands"] == ["cat x", "/tmp/profagent/profctl sleep:1"]
    assert record["not_deterministic"] == dict(NOT_DETERMINISTIC)
    assert record["host_actions_not_performed"] == {}  # this scenario has no pause
    assert record["attempts"] == [{"dir": "attempt-1", "argv": ["qemu", "-S"],
                                   "numbers": {"samples": 16}, "wall_s": 3.21,
                                   "profagent_text": "0xffffffc000330000",
                                   "rr_file": "attempt-1/rr.bin", "witness": None}]  # fmt: skip
    assert record["witness"] is False  # a replay of it is not witnessed either
    deterministic = _manifest("deterministic", scenario, ONE, images(tmp_path, "K", "R"), setup,
                              done)  # fmt: skip
    assert isinstance(deterministic["attempts"], list)
    assert deterministic["attempts"][0]["rr_file"] is None


def test_a_deterministic_run_names_the_pause_it_leaves_out() -> None:
    assert skipped_actions(load_scenario(find_scenario("nmi-ab-on"))) == ("pause-2",)
    assert skipped_actions(load_scenario(find_scenario("tprof-tp-d1-quirk"))) == ()


def test_only_a_deterministic_run_is_witnessed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--deterministic runs only"):
        run_deterministic(load_scenario(find_scenario("tprof-tp-d1-quirk")), Cache(tmp_path),
                          kind="record", attempts=1, witness=True)  # fmt: skip
    assert not any(tmp_path.iterdir())  # refused before anything was built


def test_witness_logs_are_compared_byte_for_byte(tmp_path: Path) -> None:
    attempts = [tmp_path / f"attempt-{n}" for n in (1, 2, 3)]
    for n, workdir in enumerate(attempts):
        (workdir / "witness").mkdir(parents=True)
        (workdir / "witness" / "witness-01.jsonl").write_text('{"end": 5}\n' if n < 2 else "")
    assert witness_logs_identical(attempts[:2]) is True
    assert witness_logs_identical(attempts) is False
    assert witness_logs_identical(attempts[:1]) is None  # nothing to compare with
