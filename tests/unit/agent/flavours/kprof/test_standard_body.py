"""kprof's standard run never spins its IRQ-off probe in the zero workload's phase on its CPU.

kprof's kernel traces carry no pid, so WHERE's kernel half counts every kernel sample on
the zero workload's CPU in its phase: the probe's kernel time there would be counted as
the workload's.
"""

from __future__ import annotations

import re

import pytest

from harness.agent.flavours.kprof import flavour


def _probe_and_zero(body: tuple[str, ...]) -> tuple[int, int, int]:
    """(probe CPU, zero workload CPU, ms slept before the probe)."""
    probe = next(i for i, step in enumerate(body) if "/probe:" in step)
    (zero,) = [step for step in body if step.startswith("exec:") and " zero " in step]
    slept = sum(int(step.split(":")[1]) for step in body[:probe] if step.startswith("sleep:"))
    cpu = re.search(r"cpu=(\d+)", body[probe])
    assert cpu is not None
    return int(cpu.group(1)), int(zero.split(":")[1]), slept


@pytest.mark.parametrize("cpus", [(0, 1), (0, 1, 2, 3, 4, 5, 6, 7), (2, 5)])
def test_on_several_cpus_the_probe_spins_beside_the_zero_workload_never_on_its_cpu(
    cpus: tuple[int, ...],
) -> None:
    probe, zero, slept = _probe_and_zero(flavour.standard_body(cpus, flavour.BUSY_MS))
    assert (probe, zero, slept) == (cpus[0], cpus[-1], 0)


def test_on_one_cpu_the_probe_spins_after_the_workloads_phase_and_the_run_lasts_as_long() -> None:
    body = flavour.standard_body((0,), flavour.BUSY_MS)
    probe, zero, slept = _probe_and_zero(body)
    phase_ms = flavour.BUSY_MS - flavour.TRUTH_SLACK_MS
    assert (probe, zero) == (0, 0)
    assert slept >= phase_ms + flavour.PROBE_AFTER_MS
    several = flavour.standard_body((0, 1), flavour.BUSY_MS)
    slept_in = [sum(int(s.split(":")[1]) for s in b if s.startswith("sleep:"))
                for b in (body, several)]  # fmt: skip
    assert slept_in[0] == slept_in[1]
