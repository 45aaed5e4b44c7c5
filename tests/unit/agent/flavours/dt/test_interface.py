"""dt's fuzzing ops: the model's rules for them and how a script becomes a plan.

Pure: the model over `Step` values, `script_plan` over a translated `Script`, and
`require_dt_ioctls` over profctl's recorded output lines.
"""

from __future__ import annotations

import pytest

from harness.agent import profctl
from harness.agent.flavour import Script
from harness.agent.flavours.dt.data import DT_EVT
from harness.agent.flavours.dt.flavour import FLAVOUR, script_plan
from harness.agent.flavours.dt.interface import INTERFACE
from harness.agent.flavours.dt.run import (
    PROFILE_PERIOD_NS,
    probe_request,
    record_step,
    reprobe_steps,
    require_dt_ioctls,
)
from harness.agent.steps import Results
from harness.errors import AgentStepError, GuestError
from harness.fuzz import generate
from harness.scenarios.types import Step

TARGET = generate.Target(INTERFACE, cpus=2)


@pytest.mark.parametrize(("op", "count"), [("read-size", 552), ("racers", 2), ("copy-fault", 3)])
def test_a_plan_setting_is_given_once_and_other_ops_still_run(op: str, count: int) -> None:
    facts = generate.walk(TARGET, (Step(op, count=count),))
    assert not generate.allows(TARGET, facts, Step(op, count=count))
    assert generate.allows(TARGET, facts, Step("inject", cpu=0, count=5))
    others = {"read-size", "racers", "copy-fault"} - {op}
    assert all(generate.allows(TARGET, facts, Step(o, count=2)) for o in others)


def test_reprobe_may_come_again_and_leaves_a_pending_skip_pending() -> None:
    steps = (Step("skip", cpu=1, count=3), Step("reprobe"))
    facts = generate.walk(TARGET, steps)
    assert generate.allows(TARGET, facts, Step("reprobe"))
    assert generate.closing(TARGET, facts) == (Step("inject", cpu=1, count=1),)


def test_the_fuzzer_draws_two_or_three_racers_and_an_early_copy_fault() -> None:
    assert INTERFACE.op("racers").arg("count").valid == (2, 3)
    assert INTERFACE.op("copy-fault").arg("count").valid == (1, 12)
    assert INTERFACE.op("reprobe").args == ()


def test_a_copy_fault_alone_brings_one_racer_to_fail_in() -> None:
    plan = script_plan(Script(body=(), op_counts={"copy-fault": {0: 4}}))
    assert (plan.racers, plan.copy_fault) == (1, 4)
    plan = script_plan(Script(body=(), op_counts={"copy-fault": {0: 4}, "racers": {0: 3}}))
    assert (plan.racers, plan.copy_fault) == (3, 4)


def test_a_script_without_the_new_ops_plans_no_racer_and_the_default_read() -> None:
    plan = script_plan(Script(body=(), op_counts={"read-size": {0: 400}}))
    assert (plan.racers, plan.copy_fault, plan.read_size) == (0, None, 400)
    assert script_plan(Script(body=())).read_size == DT_EVT.size * 64


def test_reprobe_is_record_off_disable_enable_record_on_in_the_body() -> None:
    request = probe_request(period_ns=PROFILE_PERIOD_NS)
    made = FLAVOUR.op_steps["reprobe"](0, 0)
    assert made == reprobe_steps()
    assert made[0] == record_step(False)
    assert made[-1] == record_step(True)
    assert all(step.endswith(request.hex()) for step in made[1:3])


def _results(lines: str, steps: tuple[str, ...]) -> Results:
    return Results.of(steps, profctl.parse_output(lines, steps))


def test_a_refused_re_enable_is_a_guest_error_naming_the_ioctl_and_errno() -> None:
    steps = reprobe_steps()
    lines = (
        "step=0 op=ioctl ok=1 rc=0 out=00000000\n"
        "step=1 op=ioctl ok=1 rc=0 out=00\n"
        "step=2 op=ioctl ok=0 errno=EEXIST\n"
        "step=3 op=ioctl ok=1 rc=0 out=01000000\n"
    )
    with pytest.raises(AgentStepError) as raised:
        require_dt_ioctls(_results(lines, steps))
    assert isinstance(raised.value, GuestError)  # the fuzzer's finding of kind "guest"
    first = str(raised.value).splitlines()[0]
    assert first.startswith("dt ioctl DTIOCPRBENABLE failed with EEXIST")


def test_other_failed_steps_are_left_to_require_ok() -> None:
    steps = (profctl.write_step("/sys/kernel/debug/profagent/skip", "cpu=0 count=1"),)
    results = _results("step=0 op=write ok=0 errno=EINVAL\n", steps)
    require_dt_ioctls(results)  # not dt's ioctl: no GuestError
