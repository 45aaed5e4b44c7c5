"""hwpmc's plans: which CPUs a run keeps busy, and what the counting run does."""

from __future__ import annotations

from harness.agent.flavours.hwpmc.data import PMC_OPS
from harness.agent.flavours.hwpmc.plans import MAX_BUSY, busy_cpus, counting_plan, standard_plan
from harness.agent.flavours.hwpmc.run import SC_INITIAL, decode_op, plan_steps, pmc_id
from harness.agent.spec import AgentSpec


def test_up_to_eight_cpus_every_cpu_is_busy() -> None:
    assert busy_cpus((0,)) == (0,)
    assert busy_cpus(tuple(range(8))) == tuple(range(8))


def test_a_large_guest_keeps_eight_busy_with_both_ends_and_the_word_edge() -> None:
    for cpus in (33, 40, 64):
        busy = busy_cpus(tuple(range(cpus)))
        assert len(busy) == MAX_BUSY
        assert {0, cpus - 1, 31, 32} <= set(busy)
        assert busy == tuple(sorted(set(busy)))
    assert 33 in busy_cpus(tuple(range(40)))


def test_the_standard_plan_samples_every_cpu_but_spins_on_the_busy_ones() -> None:
    plan = standard_plan(tuple(range(40)))
    assert len(plan.pmcs) == 40
    spun = [int(step.split(":")[1]) for step, _ in plan.body if step.startswith("spin:")]
    assert tuple(spun) == busy_cpus(tuple(range(40)))


def test_the_counting_plan_sets_starts_reads_and_brackets_its_sc_pmc() -> None:
    steps = [step for step, _ in plan_steps(counting_plan(3), AgentSpec(flavour="hwpmc"))]
    sc = pmc_id(3, "SC", row=1)
    names = {code: name for name, code in PMC_OPS.items()}
    seq = []
    for step in steps:
        if step == "clock":
            seq.append("clock")
        elif step.startswith("ioctl:"):
            op = decode_op(bytes.fromhex(step.split(":")[4]))
            seq.append(f"{names[op['op']]}:{op['id']:#x}:{op['value']}")
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
