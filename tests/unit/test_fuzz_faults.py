"""The fuzzer's fault ops: failslab and fail_page_alloc armed for the sequence's process.

Pure: the steps an op runs, the counts read back from profctl's output, generation
only on a kernel that has fault injection, and the debug kernel's fragment asking for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from harness.agent.controlspec import STATS
from harness.agent.profctl import parse_output
from harness.builder.kconfig import parse_config
from harness.cli.fuzz import format_injected
from harness.errors import InfraError
from harness.fuzz import calls, faults, generate
from harness.fuzz.generate import Target
from harness.scenarios.types import Step

IN_TREE = ("tprof", "dt", "kprof", "hwpmc")
FEW = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
CALL = (f"cat:{STATS}",)


def test_an_op_marks_its_process_inside_the_repeat_and_disarms_in_the_round() -> None:
    steps = faults.steps_of(faults.FAILSLAB, 2, CALL)
    repeat = steps.index("repeat:2:5")  # mark, the call and 3 disarms, twice
    # the repeat's own open of /dev/null comes before the process is marked
    written = {s.split(":")[1].rsplit("/", 1)[1]: s.rsplit(":", 1)[1] for s in steps[:repeat]}
    assert written["task-filter"] == "Y"
    assert written["probability"] == "100"
    assert written["ignore-gfp-wait"] == "N"
    assert written["times"] == "2"
    assert steps[repeat + 1 :] == (
        f"write:{faults.MAKE_IT_FAIL}:1",
        *CALL,
        *("write:/sys/kernel/debug/failslab/probability:0",) * 3,
        f"write:{faults.MAKE_IT_FAIL}:0",
        "cat:/sys/kernel/debug/failslab/times",
    )


def test_a_late_op_lets_its_space_through_and_forces_one_failure() -> None:
    steps = faults.steps_of(faults.FAILSLAB_LATE, 3, CALL)
    assert "write:/sys/kernel/debug/failslab/space:384" in steps
    assert "write:/sys/kernel/debug/failslab/times:1" in steps
    assert steps.count("write:/sys/kernel/debug/failslab/probability:0") == 2
    pages = faults.steps_of(faults.FAIL_PAGE_ALLOC_LATE, 5, CALL)
    assert "write:/sys/kernel/debug/fail_page_alloc/space:5" in pages
    assert faults.FAILSLAB_LATE.decl().arg("count").valid == (1, 32)
    assert "space" in faults.RESET_COMMAND


def test_fail_page_alloc_reaches_order_0_and_spares_highmem() -> None:
    steps = faults.steps_of(faults.FAIL_PAGE_ALLOC, 1, CALL)
    assert "write:/sys/kernel/debug/fail_page_alloc/min-order:0" in steps
    assert "write:/sys/kernel/debug/fail_page_alloc/ignore-gfp-highmem:Y" in steps


def _output(steps: tuple[str, ...], left: int, failed: int) -> str:
    lines = []
    for i, step in enumerate(steps):
        op = step.split(":")[0]
        if op == "repeat":
            lines.append(f"step={i} op=repeat ok=1 times=2 steps=5 failed={failed}")
        elif op == "cat":
            lines.append(f"step={i} op=cat ok=1 bytes=2 lines=1\n| {left}")
        else:
            lines.append(f"step={i} op={op} ok=1")
    return "".join(f"{line}\n" for line in lines)


def test_the_failures_forced_are_the_times_armed_less_the_times_left() -> None:
    slab = faults.steps_of(faults.FAILSLAB, 3, CALL)
    pages = faults.steps_of(faults.FAIL_PAGE_ALLOC, 2, CALL)
    steps = (*slab, *pages)  # one profctl run, every times used up
    results = parse_output(_output(steps, left=0, failed=1), steps)
    assert faults.fired(steps, results) == {"failslab": (3, 1), "fail_page_alloc": (2, 1)}
    one = parse_output(_output(slab, left=1, failed=2), slab)
    assert faults.fired(slab, one) == {"failslab": (2, 2)}


def test_fault_ops_are_drawn_only_on_a_kernel_with_fault_injection() -> None:
    interface = generate.interface_of("dt")
    without = Target(interface, 2)
    assert not {d.op for d in without.ops()} & {"failslab", "fail-page-alloc"}
    call = faults.call_of(interface)
    with_faults = Target(interface, 2, fault_call=call)
    assert {"failslab", "fail-page-alloc"} <= {d.op for d in with_faults.ops()}


@pytest.mark.parametrize("flavour", IN_TREE)
def test_each_flavour_s_fault_call_is_steps_without_a_repeat(flavour: str) -> None:
    call = faults.call_of(generate.interface_of(flavour))
    assert call.steps
    assert not any(step.startswith("repeat:") for step in call.steps)
    assert call.amounts_to is None or call.amounts_to in {
        d.op for d in generate.interface_of(flavour).ops
    }


@pytest.mark.parametrize("flavour", IN_TREE)
def test_sequences_with_fault_ops_stay_inside_the_model(flavour: str) -> None:
    interface = generate.interface_of(flavour)
    target = Target(interface, 2, fault_call=faults.call_of(interface))

    @FEW
    @given(generate.sequences(target, 12))
    def check(steps: tuple[Step, ...]) -> None:
        facts = generate.start(target)
        for step in steps:
            assert generate.allows(target, facts, step), step.describe()
            facts = generate.after(target, facts, step)
        made = calls.plan(interface, steps, lambda prefix: (), target.fault_call)
        assert all(faults.capability(s.op) is None for s in made.scenario_steps)

    check()


def test_a_tprof_fault_op_is_a_restart_to_the_model() -> None:
    interface = generate.interface_of("tprof")
    target = Target(interface, 2, fault_call=faults.call_of(interface))
    facts = generate.after(target, generate.start(target), Step("failslab", count=1))
    assert facts.get("restarts") == 1
    assert interface.model.unjudged(facts) == ("TP-O2",)


def test_no_tprof_fault_op_runs_while_the_agent_s_own_fault_is_armed() -> None:
    interface = generate.interface_of("tprof")
    target = Target(interface, 2, fault_call=faults.call_of(interface))
    armed = generate.after(target, generate.start(target), Step("fault-buf"))
    for cap in faults.CAPABILITIES:
        assert not generate.allows(target, armed, Step(cap.op, count=1)), cap.op
        assert generate.allows(target, generate.start(target), Step(cap.op, count=1))


def test_a_plan_runs_the_fault_op_in_the_sequence_s_process_and_keeps_it_out_of_the_file() -> None:
    interface = generate.interface_of("hwpmc")
    call = faults.call_of(interface)
    steps = (Step("idle", ms=5), Step("fail-page-alloc", count=2))
    made = calls.plan(interface, steps, lambda p: tuple(f"sleep:{s.ms}" for s in p), call)
    assert made.scenario_steps == (steps[0],)
    assert made.children == ()
    tail = made.body[made.body.index(f"mark:{calls.MARK}1") + 2 :]
    assert tail[:-2] == faults.steps_of(faults.FAIL_PAGE_ALLOC, 2, call.steps)
    assert calls.decl_of(interface, "fail-page-alloc").op == "fail-page-alloc"
    with pytest.raises(InfraError, match="without fault injection"):
        calls.plan(interface, steps, lambda p: ())


def test_the_summary_says_what_was_injected_or_that_the_kernel_has_none() -> None:
    assert "not in this kernel" in format_injected(None)
    assert format_injected({}) == "fault injection: no fault op ran"
    line = format_injected({"failslab": (5, 3)})
    assert line == "fault injection: failslab forced 5 failure(s), 3 step(s) refused"


def test_the_debug_kernel_asks_for_fault_injection_and_its_debugfs_files() -> None:
    fragment = Path(__file__).parents[2] / "guest" / "kconfig" / "debug.config"
    options = parse_config(fragment.read_text())
    for name in ("FAULT_INJECTION", "FAILSLAB", "FAIL_PAGE_ALLOC", "FAULT_INJECTION_DEBUG_FS"):
        assert options.get(f"CONFIG_{name}") == "y", name
