"""hwpmc's plans: what the counting run does, in what order."""

from __future__ import annotations

from dataclasses import replace

from harness.agent import profctl
from harness.agent.flavours.hwpmc.data import PMC_OPS
from harness.agent.flavours.hwpmc.flavour import peer_spec
from harness.agent.flavours.hwpmc.plans import (
    counting_plan,
    exact_plan,
    independence_plan,
    standard_plan,
)
from harness.agent.flavours.hwpmc.run import (
    SC_INITIAL,
    decode_op,
    plan_steps,
    pmc_id,
    sweep_step,
)
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.evidence import IDLE_MS, PROC_INTERRUPTS
from harness.agent.steps import kick_step


def test_the_counting_plan_sets_starts_reads_and_brackets_its_sc_pmc() -> None:
    steps = [step for step, _ in plan_steps(counting_plan(3), AgentSpec(flavour="hwpmc"))]
    sc = pmc_id(3, "SC", row=1)
    seq = []
    for step in steps:
        if step == "clock":
            seq.append("clock")
        elif step.startswith("ioctl:"):
            op = decode_op(bytes.fromhex(step.split(":")[4]))
            seq.append(f"{_op(step)}:{op['id']:#x}:{op['value']}")
    setcount, start, stop = (f"PMC{op}:{sc:#x}" for op in ("SETCOUNT", "START", "STOP"))
    assert f"{setcount}:{SC_INITIAL}" in seq
    i = seq.index(f"{start}:0")
    assert seq[i - 1 : i + 2] == ["clock", f"{start}:0", "clock"]
    j = seq.index(f"{stop}:0")
    assert seq[j - 1 : j + 2] == ["clock", f"{stop}:0", "clock"]
    assert seq.index(f"{setcount}:{SC_INITIAL}") < i
    # Three RW reads: while running (before STOP), after STOP, after the idle phase.
    reads = [k for k, item in enumerate(seq) if item.startswith(f"PMCRW:{sc:#x}")]
    assert len(reads) == 3
    assert reads[0] < j < reads[1] < reads[2]
    assert [s for s in steps if s.startswith("spin:")] == ["spin:3:1500"]


def test_the_peer_runs_ring_outlasts_the_probe_and_a_sweep() -> None:
    """200 ms IRQ-off probe + 4 ms sweep at 1 ms: 204 overflows + 2 at the ends, twice."""
    spec = AgentSpec(flavour="hwpmc")
    assert spec.param("nsamples") == 32
    assert peer_spec(spec).param("nsamples") == 2 * (204 + 2)
    assert peer_spec(replace(spec, period=100_000)).param("nsamples") == 2 * (2040 + 2)


def test_released_watches_the_pmu_until_idle_ms_after_the_last_release() -> None:
    # STOP only stops a PMC; RELEASE gives its event back (leave_event_armed re-arms
    # it there), so the third interrupt read comes IDLE_MS after the releases.
    for plan, release_early in ((standard_plan((0, 1)), False), (exact_plan((0, 1), 32), True)):
        steps = [step for step, _ in plan_steps(plan, AgentSpec(flavour="hwpmc"))]
        irq = [k for k, step in enumerate(steps) if step == f"cat:{PROC_INTERRUPTS}"]
        releases = [k for k, step in enumerate(steps)
                    if step.startswith("ioctl:") and _op(step) == "PMCRELEASE"]  # fmt: skip
        stops = [k for k, step in enumerate(steps)
                 if step.startswith("ioctl:") and _op(step) == "PMCSTOP"]  # fmt: skip
        assert plan.release_early is release_early
        assert len(irq) == 3
        assert irq[0] < stops[0]
        assert stops[-1] < irq[1] < releases[0]
        assert releases[-1] < irq[2]
        assert steps[irq[2] - 1] == profctl.sleep_step(IDLE_MS)


OP_NAMES = {code: name for name, code in PMC_OPS.items()}


def _op(step: str) -> str:
    """The PMC op of an SP_IOC_PMC_OP ioctl step, by name."""
    return OP_NAMES[decode_op(bytes.fromhex(step.split(":")[4]))["op"]]


def test_after_a_stalls_b_is_swept_last_and_only_a_runs_once_a_resumes() -> None:
    """HW-O8 under the seed's one stall flag: nothing of B's may set it after A resumes."""
    steps = [step for step, _ in independence_plan(2, 5).body]
    resume = steps.index(sweep_step(2, True))
    kick = steps.index(kick_step(5))
    spins_of_b = [k for k, step in enumerate(steps) if step.startswith("spin:5:")]
    assert steps.index("wait", max(spins_of_b)) < kick < resume
    assert [s for s in steps[resume:] if s.startswith("spin:")] == ["spin:2:300"]
