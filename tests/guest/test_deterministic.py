"""Deterministic runs in real guests: record then replay, two deterministic runs, gdb backwards.

Each test boots its own input-free guests (no pool: deterministic runs take no SSH), one at
a time. ``tprof-tp-d1-quirk`` is the 1-vCPU scenario recorded and replayed;
``dt-d1-fixed-4cpu`` the shipped multi-vCPU one run twice under ``--deterministic``.
Witnessed (``--witness``): ``tprof-throttling`` on 1 vCPU twice, every record paired,
alike with its witness logs, and with ``drop_7th_overflow`` built in, caught by the witness.
"""

from __future__ import annotations

import queue
import re
import shutil
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from harness.builder.cache import Cache
from harness.scenarios.deterministic import DeterministicResult
from harness.scenarios.deterministic_bundle import replay_deterministic, run_deterministic
from harness.scenarios.identity import differing
from harness.scenarios.load import Scenario, find_scenario, load_scenario
from harness.scenarios.witnessing import WitnessReport
from harness.timeouts import Timeouts
from harness.vm.topology import CpuTopology

pytestmark = [pytest.mark.guest, pytest.mark.selftest]
RECORDED = "tprof-tp-d1-quirk"
MULTI = "dt-d1-fixed-4cpu"
PAIRED = "tprof-throttling"  # PMU sampling on, no injected burst: WITNESS pairs every record
NO_GDB = pytest.mark.skipif(shutil.which("gdb-multiarch") is None,
                            reason="no gdb-multiarch: `invoke setup` installs it")  # fmt: skip


@pytest.fixture(scope="module")
def recording(cache: Cache) -> DeterministicResult:
    return run_deterministic(
        load_scenario(find_scenario(RECORDED)), cache, kind="record", attempts=1
    )


def numbers_of(result: DeterministicResult) -> dict[str, tuple[int | None, ...]]:
    return {row.name: row.values for row in result.rows}


def test_a_recorded_run_replays_with_every_number_identical(
    recording: DeterministicResult, cache: Cache
) -> None:
    bundle = recording.repro.bundle
    assert (bundle / "attempt-1" / "rr.bin").stat().st_size > 0
    assert recording.repro.reproduced == 1, recording.repro.verdicts
    replayed = replay_deterministic(bundle, cache)
    argv = (replayed.repro.bundle / "replay" / "argv.txt").read_text()
    assert f"rr=replay,rrfile={bundle}/attempt-1/rr.bin" in argv
    assert differing(replayed.rows) == []
    assert numbers_of(replayed)["stats.sample"] == (16, 16)  # the scenario's own count
    assert len(replayed.rows) == len(recording.rows) > 40
    console = "replay/console.log", "attempt-1/console.log"
    assert (replayed.repro.bundle / console[0]).read_bytes() == (bundle / console[1]).read_bytes()


def test_a_multi_vcpu_scenario_runs_twice_alike_under_deterministic(cache: Cache) -> None:
    result = run_deterministic(load_scenario(find_scenario(MULTI)), cache, kind="deterministic",
                               attempts=2)  # fmt: skip
    assert result.repro.reproduced == 2, result.repro.verdicts
    assert differing(result.rows) == []
    assert all(row.status == "identical" for row in result.rows)  # nothing excluded either
    assert {values[0] for name, values in numbers_of(result).items()
            if name.endswith(".x_producer_calls")} != {0}  # fmt: skip
    first, second = (result.repro.bundle / f"attempt-{n}" / "console.log" for n in (1, 2))
    assert first.read_bytes() == second.read_bytes()


def gdb_session(port: int, vmlinux: Path, timeouts: Timeouts) -> str:
    """Stop in write(2), step twice forwards and once backwards; gdb's output."""
    commands = ("set pagination off", f"target remote 127.0.0.1:{port}",
                "break __arm64_sys_write", "continue", "stepi", "stepi",
                "printf \"pc-before %#x\\n\", $pc", "reverse-stepi",
                "printf \"pc-after %#x\\n\", $pc")  # fmt: skip
    argv = ["gdb-multiarch", "-q", "-batch", "-nx", str(vmlinux)]
    for command in commands:
        argv += ["-ex", command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeouts.command_s,
                          check=False)  # fmt: skip
    return done.stdout + done.stderr


@NO_GDB
def test_gdb_steps_a_replay_backwards(
    recording: DeterministicResult, cache: Cache, timeouts: Timeouts
) -> None:
    hints: queue.Queue[str] = queue.Queue()
    outcome: list[DeterministicResult | BaseException] = []

    def replay() -> None:
        try:
            outcome.append(replay_deterministic(recording.repro.bundle, cache, gdb=True,
                                         announce=hints.put))  # fmt: skip
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)
            hints.put("failed")

    worker = threading.Thread(target=replay, daemon=True)
    worker.start()
    hint = hints.get(timeout=timeouts.boot_s)
    found = re.search(r"127\.0\.0\.1:(\d+)", hint)
    assert found, f"no gdbstub port announced: {hint}; {outcome}"
    vmlinux = Path(hint.split("gdb-multiarch ", 1)[1].split()[0])
    text = gdb_session(int(found.group(1)), vmlinux, timeouts)
    worker.join(timeouts.boot_s + 2 * timeouts.command_s)
    pcs = dict(re.findall(r"(pc-before|pc-after) (0x[0-9a-f]+)", text))
    assert set(pcs) == {"pc-before", "pc-after"}, text
    assert int(pcs["pc-after"], 16) < int(pcs["pc-before"], 16), text
    assert outcome, "the replay did not finish after gdb detached"
    result = outcome[0]
    assert isinstance(result, DeterministicResult), result
    assert differing(result.rows) == []  # going backwards changed nothing recorded


def parts(report: WitnessReport) -> dict[str, int]:
    return {judged.part or "pairs": judged.n for judged in report.judged}


def one_vcpu_sampling() -> Scenario:
    """``tprof-throttling`` on 1 vCPU: PMU sampling on, no burst (every record paired),
    about 2000 overflows; on 1 vCPU witnessed runs repeat (README, "Deterministic runs")."""
    scenario = load_scenario(find_scenario(PAIRED))
    return replace(scenario, guest=replace(scenario.guest, topology=CpuTopology()))


@NO_GDB
def test_a_witnessed_run_pairs_every_record_and_repeats_with_its_witness_log(
    cache: Cache,
) -> None:  # fmt: skip
    result = run_deterministic(one_vcpu_sampling(), cache, kind="deterministic", attempts=2,
                               witness=True)  # fmt: skip
    assert differing(result.rows) == []
    assert result.witness_logs_identical is True
    assert len(result.witnessed) == 2
    for report in result.witnessed:
        assert report.status == "PASS", report.violations
        assert report.handlers  # found through perf_event_create_kernel_counter's x3
        assert report.pairing is not None, report.unpaired
        assert report.pairing.compared > 0
        assert parts(report)["counts"] > 0
        assert not report.pairing.mismatches
    assert numbers_of(result)["witness.0.overflows"][0] == parts(result.witnessed[0])["counts"]


@NO_GDB
def test_the_witness_catches_an_agent_that_drops_an_overflow(cache: Cache) -> None:
    """drop_7th_overflow: every 7th overflow returns before any counter sees it."""
    result = run_deterministic(one_vcpu_sampling(), cache, kind="deterministic", attempts=1,
                               witness=True, mutant="drop_7th_overflow")  # fmt: skip
    (report,) = result.witnessed
    assert report.status == "FAIL"
    counted = [v for v in report.violations if v.detail == "counts"]
    assert counted, report.violations
    assert all(int(v.observed) > int(v.expected.split()[0]) for v in counted)
