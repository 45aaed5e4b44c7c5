from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import (
    ConfigError,
    GuestCrash,
    HarnessError,
    HarnessTimeout,
    HostSetupError,
    VmLaunchError,
)
from harness.vm.record import RunRecord, verdict_of


def test_verdict_of_success() -> None:
    assert verdict_of(None) == {"result": "pass"}


@pytest.mark.parametrize(
    ("error", "blame"),
    [
        (GuestCrash("the guest crashed", "Kernel panic - not syncing"), "guest"),
        (VmLaunchError("QEMU exited", ["qemu"], 1, "boom"), "infra"),
        (HarnessTimeout("SSH", 120.0), "infra"),
        (HostSetupError(["make"], "apt-get install make"), "infra"),
        (ConfigError("bad topology"), "config"),
        (HarnessError("odd"), "harness"),
        (KeyboardInterrupt(), "interrupted"),
        (ValueError("oops"), "harness-bug"),
    ],
)
def test_verdict_of_failure_names_who_to_blame(error: BaseException, blame: str) -> None:
    assert verdict_of(error) == {
        "result": "fail",
        "blame": blame,
        "error": type(error).__name__,
        "message": str(error),
    }


def test_verdict_message_is_bounded() -> None:
    verdict = verdict_of(ValueError("x" * 10_000))
    assert len(str(verdict["message"])) == 4000


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_run_record_is_valid_json_at_every_step(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    record = RunRecord(path)
    started = read(path)
    record.update(argv=["qemu-system-aarch64", "-smp", "8"], seed=7)
    updated = read(path)
    record.add_timing("boot", 6.78912)
    timed = read(path)
    record.finish(None)
    final = read(path)
    assert (started["verdict"], "finished_at" in started) == ({"result": "running"}, False)
    assert (updated["seed"], updated["argv"][1], updated["verdict"]) == (
        7,
        "-smp",
        {"result": "running"},
    )
    assert timed["timings_s"] == {"boot": 6.789}
    assert final["verdict"] == {"result": "pass"}
    assert (final["seed"], "finished_at" in final) == (7, True)


def test_run_record_final_verdict_of_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    record = RunRecord(path)
    record.finish(GuestCrash("the guest crashed during boot"))
    assert read(path)["verdict"]["blame"] == "guest"


def test_run_record_leaves_no_temporary_files(tmp_path: Path) -> None:
    record = RunRecord(tmp_path / "run.json")
    record.update(x=1)
    record.finish(None)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
