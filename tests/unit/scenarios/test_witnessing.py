"""A deterministic run's witness judged (harness.scenarios.witnessing): pure, no guest.

The witness's overflows per CPU against the agent's ``x_nmi_total`` and the kernel's PMU
interrupts, WITNESS's pairing where each overflow makes one record, and the three
verdicts: a report that compared nothing is UNJUDGED, never PASS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest

from harness.agent.flavour import AgentRun, behaviour
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.content_view import ContentView
from harness.agent.oracles.evidence import Injections, KernelEvidence
from harness.agent.values.samples import Sample
from harness.errors import GuestError, HarnessTimeout
from harness.scenarios import deterministic
from harness.scenarios.deterministic import DeterministicAttempt, DeterministicSetup
from harness.scenarios.witnessing import (
    WitnessReport,
    judge_witnessed,
    pairing_applies,
    witnessed_attempts,
)
from harness.vm.argv import DeterministicRun
from harness.vm.witness.records import WitnessLog, parse_log
from tests.unit.vm.test_witness_records import OFFSETS, hit

PC = 0xFFFFFFC008010000
SAMPLING = AgentSpec(flavour="tprof")
BURSTS_ONLY = AgentSpec(flavour="tprof", pmu_produce=False)


@dataclass
class FakeRun:
    """What the judging reads of a flavour's run: counters, the kernel's count, samples."""

    x_nmi_total: Mapping[int, int]
    spec: AgentSpec = SAMPLING
    kernel: KernelEvidence | None = None
    injections: Injections = field(default_factory=Injections)
    samples: tuple[Sample, ...] = ()

    def numbers(self) -> dict[str, int]:
        return {f"core.{cpu}.x_nmi_total": n for cpu, n in self.x_nmi_total.items()}

    def records(self) -> Sequence[object]:
        return self.samples

    def content(self) -> ContentView:
        return ContentView(self.samples, (), None)


def witnessed(per_cpu: Mapping[int, int]) -> WitnessLog:
    lines = [hit(cpu, 100 * (n + 1)) for cpu, count in per_cpu.items() for n in range(count)]
    lines.append(json.dumps({"end": len(lines)}))
    return parse_log("\n".join(lines) + "\n", OFFSETS, nmi_on=True)


def kernel(per_cpu: Mapping[int, int]) -> KernelEvidence:
    before = dict.fromkeys(per_cpu, 10)
    after = {cpu: 10 + n for cpu, n in per_cpu.items()}
    return KernelEvidence("arm-pmu", before, after, after)


def judge(run: FakeRun, log: WitnessLog) -> WitnessReport:
    return judge_witnessed(cast(AgentRun, run), log, spec=run.spec,
                           info=behaviour("tprof").info, nmi_expected=True)  # fmt: skip


def test_counts_that_meet_pass_with_how_many_overflows_compared() -> None:
    run = FakeRun({0: 3, 1: 2}, spec=BURSTS_ONLY, kernel=kernel({0: 3, 1: 2}))
    report = judge(run, witnessed({0: 3, 1: 2}))
    assert report.status == "PASS"
    assert {j.part: j.n for j in report.judged} == {"counts": 5, "complete": 5, "log": 5}
    assert report.unpaired.startswith("PMU sampling off")
    assert report.numbers() == {"witness.0.overflows": 3, "witness.1.overflows": 2,
                                "witness.hits": 5, "witness.compared": 15,
                                "witness.violations": 0}  # fmt: skip


def test_an_agent_that_loses_an_overflow_before_counting_it_fails() -> None:
    """drop_7th_overflow's shape: the handler ran 7 times, the agent counted 6."""
    run = FakeRun({0: 6}, spec=BURSTS_ONLY, kernel=kernel({0: 7}))
    report = judge(run, witnessed({0: 7}))
    assert report.status == "FAIL"
    ((violation),) = report.violations
    assert (violation.cpu, violation.expected, violation.observed) == (
        0, "6 overflows witnessed (the agent's x_nmi_total)", "7")  # fmt: skip
    assert json.loads(json.dumps(report.as_dict()))["status"] == "FAIL"


def test_a_run_without_overflows_is_unjudged_never_a_pass() -> None:
    run = FakeRun({0: 0, 1: 0}, spec=BURSTS_ONLY)
    report = judge(run, witnessed({}))
    assert report.status == "UNJUDGED"
    assert report.compared == 0
    assert "UNJUDGED" in report.summary()


def test_a_cut_log_fails() -> None:
    log = witnessed({0: 2})
    cut = WitnessLog(log.overflows, hits=3)
    report = judge(FakeRun({0: 2}, spec=BURSTS_ONLY), cut)
    assert report.status == "FAIL"
    assert "cut short" in str(report.violations[0])


@pytest.mark.parametrize(("spec", "injections", "why"), [
    (BURSTS_ONLY, Injections(), "PMU sampling off"),
    (SAMPLING, Injections(nmi={0: 12}, bursts={0: 1}), "inject bursts"),
    (SAMPLING, Injections(), ""),
])  # fmt: skip
def test_records_pair_only_where_each_overflow_made_one(
    spec: AgentSpec, injections: Injections, why: str
) -> None:
    run = FakeRun({0: 1}, spec=spec, injections=injections)
    found = pairing_applies(spec, cast(AgentRun, run))
    assert why in found if why else found == ""


def test_paired_records_are_held_to_the_witness_and_a_wrong_pc_is_caught() -> None:
    log = witnessed({0: 2})
    right = tuple(Sample(0, PC, 7, 8, False, chain=(1, 2)) for _ in range(2))
    report = judge(FakeRun({0: 2}, samples=right), log)
    assert report.status == "PASS", report.violations
    assert next(j.n for j in report.judged if j.part == "") == 2  # samples paired
    wrong = (right[0], Sample(0, PC + 4, 7, 8, False, chain=(1, 2)))
    report = judge(FakeRun({0: 2}, samples=wrong), log)
    assert report.status == "FAIL"
    assert report.pairing is not None
    assert report.pairing.by_field["pc"] == 1


def test_one_vcpu_is_witnessed_in_every_attempt_more_in_one_apart() -> None:
    """A gdb stop is deterministic on 1 vCPU only (README, "Deterministic runs")."""
    assert witnessed_attempts(True, 1) == (True, False)
    assert witnessed_attempts(True, 2) == (False, True)
    assert witnessed_attempts(False, 1) == (False, False)
    assert witnessed_attempts(False, 4) == (False, False)


def test_a_witnessed_attempt_apart_that_hangs_is_unjudged_and_a_crash_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside other guests a multi-vCPU witnessed attempt can stop making progress."""

    def hangs(*_: object) -> DeterministicAttempt:
        hung = GuestError("did not finish its input-free run and power off")
        hung.__cause__ = HarnessTimeout("guest to power off", 360.0)  # as _await_poweroff's
        raise hung

    def crashes(*_: object) -> DeterministicAttempt:
        raise GuestError("Kernel panic - not syncing")

    setup, run = cast(DeterministicSetup, None), DeterministicRun(kind="deterministic", seed=1)
    monkeypatch.setattr(deterministic, "attempt", hangs)
    aside = deterministic.attempt_apart(setup, run, tmp_path)
    assert aside.witness is not None
    assert aside.witness.status == "UNJUDGED"
    assert "did not finish" in aside.witness.summary()
    monkeypatch.setattr(deterministic, "attempt", crashes)
    with pytest.raises(GuestError, match="panic"):
        deterministic.attempt_apart(setup, run, tmp_path)
