"""kprof's session plan: what the harness counts as a flush while tracing."""

from __future__ import annotations

from harness.agent import profctl
from harness.agent.flavours.kprof.run import _flushes_before_stop, ctl_step
from harness.agent.steps import inject_step


def test_flush_commands_and_cpus_taken_offline_count_as_flushes() -> None:
    offline = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "0")
    back = profctl.write_step("/sys/devices/system/cpu/cpu3/online", "1")
    body = (inject_step(3, 7, ctx="task"), offline, ctl_step("flush"), back, ctl_step("stop"))
    assert _flushes_before_stop(body) == 2


def test_a_plain_body_has_no_flush() -> None:
    other = profctl.write_step("/sys/devices/system/cpu/cpu3/online-ish", "0")
    assert _flushes_before_stop((inject_step(0, 5, ctx="task"), other)) == 0
