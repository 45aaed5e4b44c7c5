"""CPU isolation: the evidence its steps print, and the run it wraps (a fake guest)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from harness.agent import profctl
from harness.agent.truth import isolation, program
from harness.errors import InfraError

CHAIN = program.WorkloadRun("chain", 1, 71, 71, 3, 0, 10, neighbours=(80,))


def _result(op: str, line: str) -> profctl.StepResult:
    step = {"isolate": "isolate:1:/tmp/x", "masks": "masks:1", "restore": "restore:1:/tmp/x"}[op]
    return profctl.parse_output(f"step=0 op={op} ok=1 {line}\n", [step])[0]


ISOLATE = _result("isolate", "tasks=9 moved=9 failed=0 passes=2")
RESTORED = _result("restore", "restored=8 gone=1 born=0 failed=0")


def test_the_evidence_counts_only_tasks_not_the_harnesss_own() -> None:
    masks = _result("masks", "tasks=8 including=2 tids=80,95 first=busybox")
    found = isolation.isolation_of(1, ISOLATE, masks, frozenset({71, 80}))
    assert (found.moved, found.checked, found.intruders, found.exclusive) == (9, 8, (95,), False)
    assert "tid(s) 95 (busybox)" in found.describe()
    own = _result("masks", "tasks=8 including=1 tids=80 first=profctl")
    clean = isolation.isolation_of(1, ISOLATE, own, frozenset({71, 80}))
    assert clean.exclusive
    assert clean.describe() == "exclusive (9 of 9 user tasks moved off, 8 checked after)"
    failed = _result("isolate", "tasks=9 moved=8 failed=1 passes=1 first=7:dropbear")
    assert not isolation.isolation_of(1, failed, _result("masks", "tasks=8 including=0"),
                                      frozenset()).exclusive  # fmt: skip


def test_one_cpu_has_none_to_spare() -> None:
    assert isolation.isolation_cpu((0,), 0) is None
    assert isolation.isolation_cpu((0, 1), 1) == 1


@dataclass(frozen=True)
class _Run:
    truth: program.TruthEvidence | None


@dataclass
class _Guest:
    sent: list[tuple[str, ...]] = field(default_factory=list)

    def run_steps(
        self, steps: Sequence[str], *, timeout_s: float | None = None
    ) -> tuple[profctl.StepResult, ...]:
        self.sent.append(tuple(steps))
        canned = {"isolate": ISOLATE, "restore": RESTORED,
                  "masks": _result("masks", "tasks=8 including=1 tids=71 first=truth")}  # fmt: skip
        return tuple(canned[s.partition(":")[0]] for s in steps)


def test_the_run_lies_inside_the_arrangement_and_carries_its_evidence() -> None:
    guest = _Guest()
    run = isolation.isolated(guest, 1, lambda: _Run(program.TruthEvidence((CHAIN,))))
    assert guest.sent == [("isolate:1:/tmp/profagent/isolation-1.masks",),
                          ("masks:1", "restore:1:/tmp/profagent/isolation-1.masks")]  # fmt: skip
    assert run.truth is not None
    assert run.truth.isolation[0].exclusive
    assert isolation.isolated(guest, None, lambda: _Run(None)) == _Run(None)


def test_the_masks_come_back_when_the_run_fails() -> None:
    guest = _Guest()

    def broken() -> _Run:
        raise InfraError("the run broke")

    with pytest.raises(InfraError, match="the run broke"):
        isolation.isolated(guest, 1, broken)
    assert guest.sent[-1] == ("restore:1:/tmp/profagent/isolation-1.masks",)
