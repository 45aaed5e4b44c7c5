"""kprof's session plan: what the harness counts as a flush while tracing."""

from __future__ import annotations

import pytest

from harness.agent import profctl
from harness.agent.flavours.kprof.data import KPROF
from harness.agent.flavours.kprof.run import (
    IRQ_READ,
    KprofPlan,
    _flushes_before_stop,
    _tracing_span,
    ctl_step,
    expand,
    parse_stats,
    reading,
    session_steps,
)
from harness.agent.steps import Results, inject_step, named, texts
from harness.errors import InfraError


def test_flush_commands_and_cpus_taken_offline_count_as_flushes() -> None:
    offline = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "0")
    back = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "1")
    body = (inject_step(3, 7, ctx="task"), offline, ctl_step("flush"), back, ctl_step("stop"))
    assert _flushes_before_stop(body) == 2


def test_a_plain_body_has_no_flush() -> None:
    other = profctl.write_step("/sys/devices/system/cpu/cpu3/online-ish", "0")
    assert _flushes_before_stop((inject_step(0, 5, ctx="task"), other)) == 0


def test_the_session_reads_the_clock_just_before_start_and_just_after_stop() -> None:
    plan = session_steps(KprofPlan(body=(inject_step(0, 5, ctx="task"), profctl.clock_step())))
    steps = texts(plan)
    start, stop = steps.index(ctl_step("start")), steps.index(ctl_step("stop"))
    results = [
        profctl.StepResult(i, step.split(":")[0], True, None,
                           {"ns": str(1000 * i)} if step == "clock" else {})
        for i, step in enumerate(steps)
    ]  # fmt: skip
    # The body's own clock read (a fuzz call's) is not the span's end.
    assert _tracing_span(Results.of(plan, results)) == (1000 * (start - 1), 1000 * (stop + 1))
    assert _tracing_span(Results.of(plan[:start], results[:start])) is None


def test_a_reading_is_asked_for_by_its_name() -> None:
    plan, names = expand((IRQ_READ, reading("one"), *named("other", profctl.wait_step())))
    assert names == ("one",)
    lines = {"stats": [f"{n} 1" for n in KPROF.stat_names],
             "stats_percpu": [f"0 {n} 2" for n in KPROF.percpu_names]}  # fmt: skip
    results = [
        profctl.StepResult(i, step.split(":")[0], True, None, {},
                           tuple(lines.get(step.rsplit("/", 1)[-1], ())))
        for i, step in enumerate(texts(plan))
    ]  # fmt: skip
    stats = parse_stats(Results.of(plan, results), "one")
    assert (stats.stats["qlen"], stats.get(0, KPROF.percpu_names[0])) == (1, 2)
    with pytest.raises(InfraError, match=r"0 steps named 'reading:two\.stats', not 1"):
        parse_stats(Results.of(plan, results), "two")
