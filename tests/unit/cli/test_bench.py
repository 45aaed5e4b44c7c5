"""`invoke bench`'s start-to-launch time reads the guest run records a test run leaves."""

from __future__ import annotations

import datetime
import json
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import bench
from harness.errors import InfraError
from harness.vm.record import ARTIFACTS_ENV

#: The stand-in clock: the CLI run "starts" here (an epoch second with an exact float).
STARTED = 1_800_000_000.0


def leaving(records: dict[str, float]) -> Callable[..., None]:
    """A stand-in for the CLI run: it leaves run.json files started ``seconds`` after
    `STARTED` (bench's clock reads `STARTED`; see `frozen_clock`)."""

    def run(argv: list[str], env: dict[str, str] | None = None) -> None:
        assert env is not None
        for relative, seconds in records.items():
            path = Path(env[ARTIFACTS_ENV]) / relative / "run.json"
            path.parent.mkdir(parents=True)
            began = datetime.datetime.fromtimestamp(STARTED + seconds, datetime.UTC).isoformat()
            path.write_text(json.dumps({"started_at": began}))

    return run


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench reads the wall clock once, when the CLI run starts: there it reads `STARTED`,
    so the result does not depend on how long the stand-in took."""
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(time=lambda: STARTED))


@pytest.mark.usefixtures("frozen_clock")
def test_a_restored_guest_is_found_below_its_guest_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Snapshot reset puts the record in restore-001/: the earliest guest run counts."""
    monkeypatch.setattr(bench, "_cli", leaving({"pytest/run/guest/restore-001": 5.0,
                                                "pytest/run/other": 9.0}))  # fmt: skip
    took = bench._start_to_launch(["invoke", "test"])
    assert took == pytest.approx(5.0, abs=1e-6)  # isoformat keeps microseconds


def test_a_run_that_started_no_guest_is_an_infra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "_cli", leaving({}))
    with pytest.raises(InfraError, match="no guest run record"):
        bench._start_to_launch(["invoke", "test"])


def test_the_table_shows_hwpmc_sweep_latency_per_cpu_and_its_rate() -> None:
    boot = {"launch_to_ssh": {}, "shutdown": {"median_s": 0.01, "min_s": 0.01, "max_s": 0.01}}
    latency = {
        "1": {"mean_ns": 2_097_008.1, "max_ns": 7_402_944.0, "swept": 2715.0},
        "0": {"mean_ns": 2_011_726.6, "max_ns": 7_626_128.0, "swept": 2718.0},
    }
    hwpmc = {"max_no_bufferfull_rate_hz": 8000, "sweep_latency_ns": latency}
    result = {"boot": boot, "json_path": "bench.json", "hwpmc": hwpmc}
    lines = bench.format_table(result).splitlines()
    rows = [line.split() for line in lines if line.startswith("hwpmc overflow to swept")]
    assert [(row[5], row[-2], row[-1]) for row in rows] == [
        ("0,", "2.01", "7.63"),
        ("1,", "2.10", "7.40"),
    ]
    assert any(line.split()[-1] == "8000" for line in lines if "no-bufferfull" in line)
