"""kprof's session plan: what the harness counts as a flush while tracing."""

from __future__ import annotations

from harness.agent import profctl
from harness.agent.flavours.kprof.run import (
    KprofPlan,
    _flushes_before_stop,
    _tracing_span,
    ctl_step,
    session_steps,
)
from harness.agent.steps import inject_step


def test_flush_commands_and_cpus_taken_offline_count_as_flushes() -> None:
    offline = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "0")
    back = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "1")
    body = (inject_step(3, 7, ctx="task"), offline, ctl_step("flush"), back, ctl_step("stop"))
    assert _flushes_before_stop(body) == 2


def test_a_plain_body_has_no_flush() -> None:
    other = profctl.write_step("/sys/devices/system/cpu/cpu3/online-ish", "0")
    assert _flushes_before_stop((inject_step(0, 5, ctx="task"), other)) == 0


def test_the_session_reads_the_clock_just_before_start_and_just_after_stop() -> None:
    steps = session_steps(KprofPlan(body=(inject_step(0, 5, ctx="task"),)))
    start, stop = steps.index(ctl_step("start")), steps.index(ctl_step("stop"))
    clocks = [i for i, step in enumerate(steps) if step == profctl.clock_step()]
    assert clocks == [start - 1, stop + 1]
    results = [
        profctl.StepResult(i, step.split(":")[0], True, None,
                           {"ns": str(1000 * i)} if step == "clock" else {})
        for i, step in enumerate(steps)
    ]  # fmt: skip
    assert _tracing_span(steps, results) == (1000 * (start - 1), 1000 * (stop + 1))
    assert _tracing_span(steps[:start], results[:start]) is None
